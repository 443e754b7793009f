"""A CPU hf generation never imports triton (the guard marks it absent before transformers loads
torch._dynamo), and the guard leaves a process alone where triton is already imported."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

GENERATE = """
import json, sys
from kvgate.engines.base import ArmSetup
from kvgate.engines.hf.engine import HFEngine
from kvgate.models import resolve_model
from kvgate.treatments.spec import Full
from kvgate.workload.case import Case

engine = HFEngine(resolve_model("smollm2-135m"), threads=1)
case = Case("c", "s", "t", (), 3, "exact", "", {}, None, False, {}, prompt_token_ids=(1, 504, 3458, 28))
session = engine.open(ArmSetup("full", 0, Full("full"), "test:triton"))
(generation,) = session.generate([case])
from torch.utils._triton import has_triton_package
print(json.dumps({"tokens": len(generation.output_token_ids), "error": generation.error,
                  "triton": sys.modules.get("triton") is not None, "torch_sees_triton": has_triton_package(),
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def test_a_cpu_generation_never_imports_triton(model_folder: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", GENERATE], capture_output=True, text=True, timeout=300, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["error"] is None and seen["tokens"] > 0
    assert seen["dynamo"]  # transformers did load torch._dynamo, the module that would import triton
    assert not seen["triton"] and not seen["torch_sees_triton"]


def test_the_guard_leaves_an_imported_triton_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvgate.engines.hf.triton_guard import hide_triton_without_gpu

    imported = types.ModuleType("triton")
    monkeypatch.setitem(sys.modules, "triton", imported)  # restored after the test
    assert hide_triton_without_gpu() is False
    assert sys.modules["triton"] is imported
