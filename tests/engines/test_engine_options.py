"""`-E` names are checked against the engine's options before its libraries are imported, with
"did you mean"; the lists kvgate keeps match the engines' own signatures."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from kvgate.engines.options import OWN_OPTIONS, check_engine_options, vllm_engine_arg_names
from kvgate.errors import BadInput

PROBE = """
import json, sys
from kvgate.cli import cli
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in ("torch", "transformers", "vllm") if m in sys.modules)))
"""


def _own_parameters(cls: type) -> tuple[str, ...]:
    params = list(inspect.signature(cls).parameters.values())[1:]  # after the model
    return tuple(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD)


def test_the_lists_match_the_engines_signatures() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.engines.vllm.engine import VLLMEngine

    assert OWN_OPTIONS["hf"] == _own_parameters(HFEngine)
    assert OWN_OPTIONS["vllm"] == _own_parameters(VLLMEngine)


@pytest.mark.parametrize(
    ("engine", "option", "message"),
    [
        ("hf", "thread=2", "unknown hf engine option 'thread' (-E); did you mean 'threads'?"),
        ("vllm", "dtyp=float32", "unknown vllm engine option 'dtyp' (-E); did you mean 'dtype'?"),
        (
            "hf",
            "zzz=1",
            "unknown hf engine option 'zzz' (-E); known: device, dtype, reuse_cache_bytes, threads, "
            "timeout_s, linear, attention, matvec",
        ),
    ],
)
def test_a_wrong_name_is_refused_before_any_heavy_import(
    engine: str, option: str, message: str, tmp_path: object
) -> None:
    if engine == "vllm" and vllm_engine_arg_names() is None:
        pytest.skip("vLLM is not installed here")
    argv = ["run", "--engine", engine, "-E", option, "-o", str(tmp_path)]
    probe = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert probe.stderr == f"kvgate: error: {message}\n"
    assert json.loads(probe.stdout) == []  # neither torch, transformers nor vLLM was imported


def test_vllm_engine_arguments_pass_and_the_model_is_not_one() -> None:
    names = vllm_engine_arg_names()
    if names is None:
        pytest.skip("vLLM is not installed here")
    assert {"max_model_len", "gpu_memory_utilization"} <= names
    check_engine_options("vllm", {"max_model_len": 512, "dtype": "float32"})
    with pytest.raises(BadInput, match="choose the model with --model"):
        check_engine_options("vllm", {"model": "x"})
    with pytest.raises(BadInput, match="set per arm by its treatment"):
        check_engine_options("vllm", {"kv_cache_dtype": "fp8"})
