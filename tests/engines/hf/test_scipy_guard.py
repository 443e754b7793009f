"""The hf engine loads transformers' model machinery without scipy (scipy_guard): a generation imports
none of it, makes the same tokens as where scipy was imported first (the guard then does nothing), and
kvgate's own statistics still import scipy afterwards in the same process."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

GENERATE = """
import json, sys
if sys.argv[1] == "scipy first":
    import scipy.optimize
from kvgate.engines.base import ArmSetup
from kvgate.engines.hf.engine import HFEngine
from kvgate.models import resolve_model
from kvgate.treatments.spec import Full
from kvgate.workload.case import Case

engine = HFEngine(resolve_model("smollm2-135m"), threads=1)
case = Case("c", "s", "t", (), 12, "exact", "", {}, None, False, {}, prompt_token_ids=(1, 504, 3458, 28))
session = engine.open(ArmSetup("full", 0, Full("full"), "test:scipy"))
(generation,) = session.generate([case])
scipy_at_generation = sorted(m for m in sys.modules if m.split(".")[0] == "scipy" and sys.modules[m])
from transformers.utils import is_scipy_available
from kvgate.stats.intervals import cp_upper
print(json.dumps({"tokens": generation.output_token_ids, "error": generation.error,
                  "scipy": scipy_at_generation, "transformers_sees_scipy": is_scipy_available(),
                  "bound": cp_upper(0, 10, 0.95)}))
"""


def generate(first: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", GENERATE, first], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_generation_imports_no_scipy_and_makes_the_same_tokens(model_folder: Path) -> None:
    guarded, unguarded = generate("plain"), generate("scipy first")
    assert guarded["error"] is None and len(guarded["tokens"]) > 0
    assert guarded["scipy"] == [] and guarded["transformers_sees_scipy"] is False
    assert "scipy.optimize" in unguarded["scipy"] and unguarded["transformers_sees_scipy"] is True
    assert guarded["tokens"] == unguarded["tokens"]
    assert guarded["bound"] == unguarded["bound"] == pytest.approx(1 - 0.05 ** (1 / 10))  # scipy after


def test_the_guard_leaves_an_imported_scipy_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf import scipy_guard

    imported = types.ModuleType("scipy")
    monkeypatch.setitem(sys.modules, "scipy", imported)  # restored after the test
    monkeypatch.setattr(scipy_guard, "MODEL_MACHINERY", "json")  # a module to import, cheaply
    assert scipy_guard.import_model_machinery_without_scipy() is False
    assert sys.modules["scipy"] is imported


def test_the_marker_is_removed_when_the_import_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf import scipy_guard

    monkeypatch.delitem(sys.modules, "scipy", raising=False)  # restored after the test
    monkeypatch.setattr(scipy_guard, "_transformers_found_scipy", lambda: False)
    monkeypatch.setattr(scipy_guard, "MODEL_MACHINERY", "kvgate_no_such_module")
    with pytest.raises(ModuleNotFoundError):
        scipy_guard.import_model_machinery_without_scipy()
    assert "scipy" not in sys.modules
