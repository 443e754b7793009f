"""The hf engine's two import guards, seen from a fresh process that makes one CPU generation:

- scipy_guard loads transformers' model machinery without scipy: the generation imports none of it, makes
  the same tokens as where scipy was imported first (the guard then does nothing), and kvgate's own
  statistics still import scipy afterwards in the same process;
- triton_guard marks triton absent before transformers loads torch._dynamo: the generation never imports
  triton, though torch._dynamo is loaded.

Each guard leaves alone a process where its package is already imported."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

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
session = engine.open(ArmSetup("full", 0, Full("full"), "test:guards"))
(generation,) = session.generate([case])
scipy_at_generation = sorted(m for m in sys.modules if m.split(".")[0] == "scipy" and sys.modules[m])
triton_at_generation = sys.modules.get("triton") is not None
from torch.utils._triton import has_triton_package
from transformers.utils import is_scipy_available
from kvgate.stats.intervals import cp_upper
print(json.dumps({"tokens": generation.output_token_ids, "error": generation.error,
                  "scipy": scipy_at_generation, "transformers_sees_scipy": is_scipy_available(),
                  "bound": cp_upper(0, 10, 0.95), "triton": triton_at_generation,
                  "torch_sees_triton": has_triton_package(), "dynamo": "torch._dynamo" in sys.modules}))
"""


def generate(first: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", GENERATE, first], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def guarded(model_folder: Path) -> dict[str, Any]:
    """What a fresh process saw of its generation, both guards at work (one process for both tests)."""
    return generate("plain")


def test_a_generation_imports_no_scipy_and_makes_the_same_tokens(guarded: dict[str, Any]) -> None:
    unguarded = generate("scipy first")
    assert guarded["error"] is None and len(guarded["tokens"]) > 0
    assert guarded["scipy"] == [] and guarded["transformers_sees_scipy"] is False
    assert "scipy.optimize" in unguarded["scipy"] and unguarded["transformers_sees_scipy"] is True
    assert guarded["tokens"] == unguarded["tokens"]
    assert guarded["bound"] == unguarded["bound"] == pytest.approx(1 - 0.05 ** (1 / 10))  # scipy after


def test_a_cpu_generation_never_imports_triton(guarded: dict[str, Any]) -> None:
    assert guarded["error"] is None and len(guarded["tokens"]) > 0
    assert guarded["dynamo"]  # transformers did load torch._dynamo, the module that would import triton
    assert not guarded["triton"] and not guarded["torch_sees_triton"]


def test_the_scipy_guard_leaves_an_imported_scipy_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf import scipy_guard

    imported = types.ModuleType("scipy")
    monkeypatch.setitem(sys.modules, "scipy", imported)  # restored after the test
    monkeypatch.setattr(scipy_guard, "MODEL_MACHINERY", "json")  # a module to import, cheaply
    assert scipy_guard.import_model_machinery_without_scipy() is False
    assert sys.modules["scipy"] is imported


def test_the_scipy_marker_is_removed_when_the_import_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf import scipy_guard

    monkeypatch.delitem(sys.modules, "scipy", raising=False)  # restored after the test
    monkeypatch.setattr(scipy_guard, "_transformers_found_scipy", lambda: False)
    monkeypatch.setattr(scipy_guard, "MODEL_MACHINERY", "kvgate_no_such_module")
    with pytest.raises(ModuleNotFoundError):
        scipy_guard.import_model_machinery_without_scipy()
    assert "scipy" not in sys.modules


def test_the_triton_guard_leaves_an_imported_triton_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf.triton_guard import hide_triton_without_gpu

    imported = types.ModuleType("triton")
    monkeypatch.setitem(sys.modules, "triton", imported)  # restored after the test
    assert hide_triton_without_gpu() is False
    assert sys.modules["triton"] is imported
