"""Offload arms of the server flavours proven by the stacks' own counters: SGLang's HiCache splits each
answer's cached tokens into device and host (`meta_info.cached_tokens_details`), llama-server answers its
slot save and restore with the tokens it wrote and read back; the stub answers in those shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("httpx")
from stub_server import launch_template

from kvgate.engines.base import ArmSetup
from kvgate.engines.fake import reference_answer
from kvgate.engines.server.engine import ServerEngine, ServerSession
from kvgate.engines.server.flavours.sglang import SGLang
from kvgate.engines.server.flavours.trtllm import TensorRTLLM
from kvgate.engines.server.response import MalformedResponse
from kvgate.errors import BadInput, EngineFailure
from kvgate.models import resolve_model
from kvgate.treatments.spec import Composite, Full, Offload, Reuse, Treatment
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload

REUSE = Reuse("prefix-reuse")
HOST_OFFLOAD = Composite("reuse+offload", of=(REUSE, Offload("offload-host")))
DISK_OFFLOAD = Composite("reuse+offload-disk", of=(REUSE, Offload("offload-disk", tier="disk", block_size=8)))
ANSWER = {  # SGLang's native /generate answer with HiCache on (its docs' sending-requests example)
    "text": " Paris.", "output_ids": [6342, 30],
    "meta_info": {"id": "a1", "finish_reason": {"type": "stop"}, "prompt_tokens": 7, "completion_tokens": 2,
                  "cached_tokens": 4, "cached_tokens_details": {"device": 1, "host": 3}},
}  # fmt: skip


@pytest.fixture(scope="module")
def cases(smoke_workload: Path) -> tuple[Case, ...]:
    return read_workload(smoke_workload).cases[:4]


def _session(engine: ServerEngine, treatment: Treatment, run_dir: Path) -> ServerSession:
    setup = ArmSetup(treatment.name, 0, treatment, f"kvgate-ns:t:{treatment.name}:r0:a0", batch_size=4,
                     concurrency=2, run_dir=run_dir)  # fmt: skip
    return engine.open(setup)


def test_sglang_reads_the_host_tokens_of_its_answer() -> None:
    assert SGLang(name="sglang").parse(ANSWER, 7).tier_tokens == 3
    without = {**ANSWER, "meta_info": {**ANSWER["meta_info"], "cached_tokens_details": None}}
    assert SGLang(name="sglang").parse(without, 7).tier_tokens is None  # HiCache off, or nothing cached
    lying = {**ANSWER, "meta_info": {**ANSWER["meta_info"], "cached_tokens_details": {"host": 5}}}
    with pytest.raises(MalformedResponse, match=r"cached_tokens_details\.host"):
        SGLang(name="sglang").parse(lying, 7)


def test_a_launched_sglang_offload_arm_reads_blocks_back_from_host_memory(
    answers_file: Path, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """The stub's device keeps 8 tokens, so the measured hits come from HiCache's host tier: each row's
    blocks read back are its host tokens over the offload's block size (16), as SGLang counted them."""
    template = launch_template(answers_file, "--flavour sglang", "--block-size 4", "--max-total-tokens 8")
    engine = ServerEngine(resolve_model(str(stub_model)), command=template, flavour="sglang", ready_s=30.0)
    session = _session(engine, HOST_OFFLOAD, tmp_path)
    assert session.command is not None and "--enable-hierarchical-cache" in session.command
    rows = session.generate(cases)
    session.close()
    assert [g.output_text for g in rows] == [reference_answer(c) for c in cases]
    assert all(g.n_tier_read and g.n_tier_read >= (g.n_cached_tokens - 8) // 16 > 0 for g in rows)
    control = _session(engine, Full("full"), tmp_path)
    assert {g.n_tier_read for g in control.generate(cases)} == {None}  # no offload: no tier counted
    control.close()


@pytest.fixture
def stub_gguf(stub_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A file the engine takes as the GGUF llama-server serves (the stub loads no weights), its
    tokenizer's folder the stub model's (no vocabulary: the stub answers word ids)."""
    import kvgate.engines.server.engine as server_engine

    monkeypatch.setattr(server_engine, "model_folder", lambda model: stub_model)
    path = tmp_path / "stub.gguf"
    path.write_bytes(b"GGUF")
    return str(path)


def test_a_launched_llama_server_offload_arm_round_trips_each_slot_through_a_file(
    answers_file: Path, cases: tuple[Case, ...], tmp_path: Path, stub_gguf: str
) -> None:
    """Each case is saved after its warm-up, the slot erased, and restored before its measured request:
    the rows carry the server's own n_saved and n_restored in blocks of 8, and the hits it served."""
    template = launch_template(answers_file, "--flavour llama-server", "--block-size 1")
    engine = ServerEngine(resolve_model(stub_gguf), command=template, flavour="llama-server", ready_s=30.0)
    session = _session(engine, DISK_OFFLOAD, tmp_path)
    assert session.command is not None
    slots = Path(session.command[session.command.index("--slot-save-path") + 1])
    rows = session.generate(cases)
    session.close()
    assert [g.output_text for g in rows] == [reference_answer(c) for c in cases]
    for case, row in zip(cases, rows, strict=True):
        saved = len(case.prompt_token_ids or ())  # the warm-up's prompt, as the slot holds it
        assert row.n_tier_written == row.n_tier_read == -(-saved // 8) and row.n_cached_tokens > 0
    assert slots.parent == tmp_path / "server" and len(list(slots.glob("*.bin"))) == len(cases)


def test_a_restore_that_loads_nothing_is_caught(
    answers_file: Path, cases: tuple[Case, ...], tmp_path: Path, stub_gguf: str
) -> None:
    """A planted server that answers a restore as done and loads nothing: the measured requests read no
    cached token, which a reuse arm may not (its counters checked per batch)."""
    template = launch_template(
        answers_file, "--flavour llama-server", "--block-size 1", "--slot-restore-noop"
    )
    engine = ServerEngine(resolve_model(stub_gguf), command=template, flavour="llama-server", ready_s=30.0)
    session = _session(engine, DISK_OFFLOAD, tmp_path)
    with pytest.raises(EngineFailure, match=r"arm 'reuse\+offload-disk'"):
        session.generate(cases)
    session.close()


def test_a_flavour_refuses_a_pool_size_it_does_not_map(answers_file: Path, stub_model: Path) -> None:
    """kv_blocks sizes vLLM's pool; a flavour launched without it would run the arm unpressured, silently."""
    template = launch_template(answers_file, "--flavour sglang")
    engine = ServerEngine(resolve_model(str(stub_model)), command=template, flavour="sglang", ready_s=30.0)
    setup = ArmSetup("r", 0, REUSE, "kvgate-ns:t:r:r0:a0", batch_size=4, concurrency=1, kv_blocks=8)
    with pytest.raises(BadInput, match="sglang flavour's pool is not mapped"):
        engine.open(setup)


@pytest.mark.parametrize("device_tokens", [8, 0])
def test_kvgate_run_shows_an_sglang_offload_arms_proof_from_its_host_tokens(
    device_tokens: int, smoke_workload: Path, stub_model: Path, answers_file: Path, tmp_path: Path
) -> None:
    """End to end: the report's proof of the offload arm is shown, its blocks read back summed from the
    host tokens SGLang's answers name, when a device of 8 tokens pushes every warmed-up prompt out; with
    a device that keeps them all (0: unbounded) no block came back from host memory, and the arm's
    missing proof is an error (exit 4), never a pass."""
    import json

    from click.testing import CliRunner

    from kvgate.cli import cli

    matrix = tmp_path / "offload.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["reuse-offload"]\naa_replicate = false\n'
        '[treatment.reuse-offload]\nkind = "composite"\nof = ["prefix-reuse", "offload-host"]\n'
    )
    device = f"--max-total-tokens {device_tokens}"
    template = launch_template(answers_file, "--flavour sglang", "--block-size 4", device)
    argv = ["run", "-w", str(smoke_workload), "-m", str(matrix), "--model", str(stub_model), "--limit", "4"]
    options = ["--engine", "server", "-E", "flavour=sglang", "-E", f"command={template}"]
    result = CliRunner().invoke(cli, [*argv, *options, "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == (3 if device_tokens else 4), result.output  # 4 cases: inconclusive at best
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "--format", "json"])
    (arm,) = [a for a in json.loads(report.stdout)["arms"] if a["arm"] == "reuse-offload"]
    if device_tokens:
        assert arm["proof"]["status"] == "shown" and arm["proof"]["tier_blocks_read"] > 0
    else:
        assert arm["proof"]["status"] == "missing" and arm["proof"]["tier_blocks_read"] == 0


EVENTS = [  # trtllm-serve's POST /kv_cache_events (tensorrt_llm/_utils.py KVCacheEventSerializer)
    {"event_id": 0, "data": {"type": "created", "num_blocks_per_cache_level": [64, 128]},
     "window_size": 4096},
    {"event_id": 1, "data": {"type": "stored", "parent_hash": None, "blocks": []}, "window_size": 4096},
    {"event_id": 2, "data": {"type": "updated", "block_hash": 7, "cache_level": {"type": "event_diff",
     "old_value": 0, "new_value": 1}, "priority": None}, "window_size": 4096},
    {"event_id": 3, "data": {"type": "updated", "block_hash": 7, "cache_level": {"type": "event_diff",
     "old_value": 1, "new_value": 0}, "priority": None}, "window_size": 4096},
    {"event_id": 4, "data": {"type": "updated", "block_hash": 9, "cache_level": None, "priority": {
     "type": "event_diff", "old_value": 35, "new_value": 50}}, "window_size": 4096},
]  # fmt: skip


def test_trtllm_counts_offloaded_and_onboarded_blocks_in_its_events() -> None:
    trtllm = TensorRTLLM(name="trtllm")
    assert trtllm.tier_events(EVENTS) == (1, 1)  # a priority change moves nothing
    with pytest.raises(MalformedResponse, match="not a list"):
        trtllm.tier_events({"events": EVENTS})
    config = trtllm.launch(HOST_OFFLOAD, kv_blocks=8).config or ""
    assert "  max_tokens: 256\n" in config and "  tokens_per_block: 32\n" in config
    assert "  host_cache_size: 1073741824\n" in config and "  event_buffer_max_size: 65536\n" in config


@pytest.mark.parametrize("planted", [False, True])
def test_a_launched_trtllm_offload_arm_reads_its_blocks_from_the_servers_events(
    planted: bool, answers_file: Path, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """A GPU pool of 2 blocks (kv_blocks = 2: 64 tokens) pushes each warmed-up prompt to host memory;
    each measured request onboards its blocks back, one event each, drained around the request. A
    server keeping no events (planted) reads none: the arm then has no proof."""
    template = launch_template(answers_file, "--block-size 4", *(["--events-noop"] if planted else []))
    engine = ServerEngine(resolve_model(str(stub_model)), command=template, flavour="trtllm", ready_s=30.0)
    setup = ArmSetup(HOST_OFFLOAD.name, 0, HOST_OFFLOAD, "kvgate-ns:t:o:r0:a0", batch_size=4, concurrency=2,
                     run_dir=tmp_path, kv_blocks=2)  # fmt: skip
    session = engine.open(setup)
    rows = session.generate(cases)
    session.close()
    assert [g.output_text for g in rows] == [reference_answer(c) for c in cases]
    if planted:
        assert {(g.n_tier_written, g.n_tier_read) for g in rows} == {(0, 0)}
    else:
        assert all(g.n_tier_read == g.n_cached_tokens // 4 > 0 for g in rows)  # every hit came from host
