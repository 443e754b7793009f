"""The server engine's flavours (SGLang, TensorRT-LLM, llama-server): each arm's flags, refusals in the
stack's own words, answers in the shapes their docs and code give, and sessions against the stub
answering in those shapes (none of the three stacks is installed here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
from stub_server import StubServer, launch_template, start_stub

from kvgate.engines.base import ArmSetup
from kvgate.engines.fake import reference_answer
from kvgate.engines.server.engine import ServerEngine
from kvgate.engines.server.flavours.registry import FLAVOURS
from kvgate.engines.server.response import MalformedResponse
from kvgate.engines.server.session import ServerSession
from kvgate.errors import BadInput
from kvgate.models import resolve_model
from kvgate.treatments.spec import Composite, Eviction, Full, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload

REUSE = Reuse("prefix-reuse")
OFFLOAD = Composite("reuse+offload", of=(REUSE, Offload("offload-host")))
DISK_OFFLOAD = Composite("reuse+offload-disk", of=(REUSE, Offload("offload-disk", tier="disk")))


def test_sglang_flags_per_arm() -> None:
    sglang = FLAVOURS["sglang"]
    base = ["--enable-cache-report", "--random-seed", "0"]
    assert sglang.launch(Full("full")).flags == [*base, "--disable-radix-cache"]
    assert sglang.launch(Quantize("fp8", dtype="fp8_e4m3")).flags == [
        *base, "--disable-radix-cache", "--kv-cache-dtype", "fp8_e4m3",
    ]  # fmt: skip
    assert sglang.launch(Quantize("fp4", dtype="nvfp4")).flags[-2:] == ["--kv-cache-dtype", "nvfp4"]
    assert sglang.launch(REUSE).flags == base  # the radix cache stays on
    assert sglang.launch(OFFLOAD).flags == [*base, "--enable-hierarchical-cache"]
    argv = sglang.command("/m", "127.0.0.1", 5, "/py")
    assert argv == [
        "/py",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "5",
    ]


def test_trtllm_writes_its_kv_cache_config() -> None:
    trtllm = FLAVOURS["trtllm"]
    control = trtllm.launch(Full("full"))
    assert control.flags == ["--extra_llm_api_options", "{config}"]
    assert control.config == "kv_cache_config:\n  enable_block_reuse: false\n  dtype: auto\n"
    assert "dtype: fp8\n" in (trtllm.launch(Quantize("fp8", dtype="fp8_e4m3")).config or "")
    assert "enable_block_reuse: true\n" in (trtllm.launch(REUSE).config or "")


def test_llama_server_flags_per_arm() -> None:
    server = FLAVOURS["llama-server"]
    assert server.launch(Full("full")).flags == [
        "--parallel", "1", "--metrics", "--seed", "0", "--log-verbosity", "4", "--cache-ram", "0"
    ]  # fmt: skip
    assert "--cache-ram" not in server.launch(Reuse("prefix-reuse")).flags
    assert "--cache-ram" in server.launch(DISK_OFFLOAD).flags
    kv = server.launch(Quantize("kv", dtype="q8_0", dtype_v="q4_0")).flags
    assert kv[-6:] == ["--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--flash-attn", "on"]
    _, control = server.request("m", [1, 2], 4, "salt", True, reuse=False)
    _, reuse = server.request("m", [1, 2], 4, "salt", True, reuse=True)
    assert control["cache_prompt"] is False and reuse["cache_prompt"] is True and control["return_tokens"]


@pytest.mark.parametrize(
    ("flavour", "treatment", "words"),
    [
        ("sglang", Eviction("e"), "SGLang does not evict"),
        ("sglang", Quantize("q", dtype="int8_per_token_head"), "SGLang's --kv-cache-dtype takes"),
        ("sglang", Quantize("q", dtype="q4_0"), "q4_0 is not one of them"),
        ("sglang", Offload("o"), "compose offload with prefix reuse"),
        ("sglang", Reuse("s", mode="span"), "identical token prefixes only"),
        ("sglang", Quantize("q", dtype="fp8_e4m3", scale="head"), "per layer"),
        ("trtllm", Eviction("e"), "max_attention_window"),
        ("trtllm", Quantize("q", dtype="fp8_e5m2"), "kv_cache_config.dtype takes auto, float16"),
        ("trtllm", Offload("o"), "compose offload with prefix reuse"),
        ("llama-server", Eviction("e"), "--context-shift"),
        ("llama-server", Quantize("q", dtype="nvfp4"), "--cache-type-k/-v takes"),
        ("llama-server", Offload("o", tier="disk"), "compose offload with prefix reuse"),
        ("llama-server", OFFLOAD, 'tier = "disk"'),
        ("llama-server", Full("f", engine_args={"block_size": 16}), "engine_args are vLLM's"),
    ],
)
def test_refusals_in_the_stacks_own_words(flavour: str, treatment: Treatment, words: str) -> None:
    reason = FLAVOURS[flavour].refusal(treatment)
    assert reason is not None and words in reason and "\n" not in reason


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_what_each_stack_applies_is_not_refused(flavour: str) -> None:
    applied = [Full("full"), REUSE, OFFLOAD] + [
        Quantize("q", dtype=d) for d in {"sglang": ["fp8_e4m3", "nvfp4"], "trtllm": ["fp8_e4m3", "nvfp4"],
                                         "llama-server": ["q8_0", "q4_0", "iq4_nl"]}[flavour]
    ]  # fmt: skip
    if flavour == "llama-server":
        applied[applied.index(OFFLOAD)] = DISK_OFFLOAD
    assert [FLAVOURS[flavour].refusal(t) for t in applied] == [None] * len(applied)


SGLANG_ANSWER = {  # SGLang's native /generate answer (docs: native API), two output tokens
    "text": " Paris.",
    "output_ids": [6342, 30],
    "meta_info": {"id": "a1", "finish_reason": {"type": "stop", "matched": 2}, "prompt_tokens": 7,
                  "completion_tokens": 2, "cached_tokens": 4,
                  "output_token_logprobs": [[-0.1, 6342, None], [-0.5, 30, None]]},
}  # fmt: skip
LLAMA_ANSWER = {  # llama-server's /completion answer (tools/server/README.md)
    "content": " Paris.", "tokens": [6342, 30], "stop": True, "stop_type": "eos", "tokens_evaluated": 7,
    "tokens_cached": 9, "truncated": False, "timings": {"cache_n": 4, "prompt_n": 3, "predicted_n": 2},
    "completion_probabilities": [{"id": 6342, "logprob": -0.1, "token": " Paris", "top_logprobs": []},
                                 {"id": 30, "logprob": -0.5, "token": ".", "top_logprobs": []}],
}  # fmt: skip
TRTLLM_ANSWER = {  # trtllm-serve's /v1/completions answer (tensorrt_llm/serve/openai_protocol.py)
    "id": "cmpl-1", "object": "text_completion", "model": "m",
    "choices": [{"index": 0, "text": " Paris.", "token_ids": [6342, 30], "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9,
              "prompt_tokens_details": {"cached_tokens": 4}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("flavour", "answer"),
    [("sglang", SGLANG_ANSWER), ("llama-server", LLAMA_ANSWER), ("trtllm", TRTLLM_ANSWER)],
)
def test_each_stacks_answer_is_read(flavour: str, answer: dict[str, Any]) -> None:
    completion = FLAVOURS[flavour].parse(answer, 7)
    assert completion.token_ids == (6342, 30) and completion.text == " Paris."
    assert completion.cached_tokens == 4 and completion.prompt_tokens == 7
    assert completion.finish_reason == "stop"
    if flavour != "trtllm":
        assert completion.logprobs == (-0.1, -0.5)
    with pytest.raises(MalformedResponse, match="7"):
        FLAVOURS[flavour].parse(answer, 8)  # the stack saw another prompt length


def test_malformed_answers_name_the_field() -> None:
    broken = {**SGLANG_ANSWER, "output_ids": None}
    with pytest.raises(MalformedResponse, match="output_ids"):
        FLAVOURS["sglang"].parse(broken, 7)
    meta = {**SGLANG_ANSWER["meta_info"], "cached_tokens": 99}
    with pytest.raises(MalformedResponse, match="cached_tokens"):
        FLAVOURS["sglang"].parse({**SGLANG_ANSWER, "meta_info": meta}, 7)
    probs = [{"id": 1, "logprob": -0.1}, {"id": 30, "logprob": -0.5}]
    with pytest.raises(MalformedResponse, match="completion_probabilities"):
        FLAVOURS["llama-server"].parse({**LLAMA_ANSWER, "completion_probabilities": probs}, 7)


@pytest.fixture(scope="module")
def cases(smoke_workload: Path) -> tuple[Case, ...]:
    return read_workload(smoke_workload).cases[:6]


@pytest.fixture
def caching_stub(answers: dict[str, str]) -> Iterator[StubServer]:
    server = start_stub(answers, prefix_caching=True, block_size=4)
    yield server
    server.stop()


def _session(engine: ServerEngine, treatment: Treatment, run_dir: Path | None = None) -> ServerSession:
    setup = ArmSetup(treatment.name, 0, treatment, f"kvgate-ns:t:{treatment.name}:r0:a0", batch_size=6,
                     concurrency=2, run_dir=run_dir)  # fmt: skip
    return engine.open(setup)


@pytest.mark.parametrize("flavour", ["sglang", "llama-server", "trtllm"])
def test_a_reuse_arm_reads_the_stacks_cached_tokens(
    flavour: str, caching_stub: StubServer, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    engine = ServerEngine(resolve_model(str(stub_model)), endpoints={"*": caching_stub.url}, flavour=flavour)
    session = _session(engine, REUSE)
    generations = session.generate(cases)
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases]
    assert all(g.n_cached_tokens > 0 for g in generations)  # each prompt was warmed up first


def test_llama_servers_control_keeps_its_prompt_cache_off(
    caching_stub: StubServer, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    """llama-server caches prompts by default; the control asks it not to (cache_prompt false), and the
    same prompts sent twice read 0 cached tokens."""
    engine = ServerEngine(
        resolve_model(str(stub_model)), endpoints={"*": caching_stub.url}, flavour="llama-server"
    )
    session = _session(engine, Full("full"))
    again = session.generate(cases) + session.generate(cases)
    session.close()
    assert [g.n_cached_tokens for g in again] == [0] * 2 * len(cases)


def test_a_launched_sglang_gets_its_flags_and_honours_them(
    answers_file: Path, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """Launched through the stub standing for SGLang: the control's server gets --disable-radix-cache
    (no hit even for prompts sent twice), the reuse arm's keeps its radix cache (hits)."""
    template = launch_template(answers_file, "--flavour sglang", "--block-size 4")
    engine = ServerEngine(resolve_model(str(stub_model)), command=template, flavour="sglang", ready_s=30.0)
    control = _session(engine, Full("full"), tmp_path)
    assert control.command is not None and "--disable-radix-cache" in control.command
    twice = control.generate(cases) + control.generate(cases)
    control.close()
    assert [g.n_cached_tokens for g in twice] == [0] * 2 * len(cases)
    reuse = _session(engine, REUSE, tmp_path)
    assert reuse.command is not None and "--disable-radix-cache" not in reuse.command
    hits = reuse.generate(cases)
    reuse.close()
    assert all(g.n_cached_tokens > 0 for g in hits)
    assert engine.fingerprint()["flavour"] == "sglang"


def test_a_launched_sglang_names_the_kv_dtype_it_stores(
    answers_file: Path, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """The rows carry the dtype SGLang's /get_server_info names (its resolved --kv-cache-dtype), the
    proof's evidence; a server that ignores the flag (the planted no-op) names its own."""
    engine = ServerEngine(
        resolve_model(str(stub_model)), command=launch_template(answers_file, "--flavour sglang"),
        flavour="sglang", ready_s=30.0,
    )  # fmt: skip
    session = _session(engine, Quantize("fp8", dtype="fp8_e4m3"), tmp_path)
    assert {g.kv_dtype for g in session.generate(cases[:2])} == {"fp8_e4m3"}
    session.close()
    ignoring = ServerEngine(
        resolve_model(str(stub_model)), flavour="sglang", ready_s=30.0,
        command=launch_template(answers_file, "--flavour sglang", "--ignore-kv-cache-dtype"),
    )  # fmt: skip
    session = _session(ignoring, Quantize("fp8", dtype="fp8_e4m3"), tmp_path)
    assert {g.kv_dtype for g in session.generate(cases[:2])} == {"auto"}
    session.close()


def test_a_launched_trtllm_reads_its_config_file(
    answers_file: Path, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    template = launch_template(answers_file)
    engine = ServerEngine(resolve_model(str(stub_model)), command=template, flavour="trtllm", ready_s=30.0)
    session = _session(engine, Quantize("fp8", dtype="fp8_e4m3"), tmp_path)
    assert session.command is not None
    config = Path(session.command[session.command.index("--extra_llm_api_options") + 1])
    assert config.read_text() == "kv_cache_config:\n  enable_block_reuse: false\n  dtype: fp8\n"
    generations = session.generate(cases[:2])
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases[:2]]


def test_flavour_options_are_checked(stub_model: Path) -> None:
    model = resolve_model(str(stub_model))
    with pytest.raises(BadInput, match="flavour must be one of vllm, sglang, trtllm, llama-server"):
        ServerEngine(model, flavour="tgi")
    with pytest.raises(BadInput, match="vLLM options apply to the vllm flavour"):
        ServerEngine(model, flavour="sglang", dtype="float32")
    with pytest.raises(BadInput, match="llama-server serves a GGUF"):
        ServerEngine(model, flavour="llama-server")
