"""The llama-server flavour for real: llama.cpp's own server (built by `make setup` from the llama.cpp that
llama-cpp-python vendors: kvgate/engines/server/llama_server_build.py) on the embedded model's own GGUF,
a few short passkey cases per arm, one server per arm.

Every claim is read back from the server: the cached prompt tokens from each answer's `timings.cache_n`
and /metrics' `llamacpp:prompt_tokens_cached_total`, the KV types and bytes from the log line it printed
allocating its cache, its version from /props' `build_info`. Skipped, with the reason, only where no
llama-server is built.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from helpers.passkey_cases import passkey_cases

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.server.engine import ServerEngine, ServerSession
from kvgate.engines.server.flavours.llama_server import LlamaServer, executable
from kvgate.engines.server.response import Completion
from kvgate.errors import EngineFailure
from kvgate.models import resolve_model
from kvgate.treatments.spec import Composite, Full, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case

LLAMA_SERVER = shutil.which(executable(sys.executable))
pytestmark = [
    pytest.mark.skipif(
        LLAMA_SERVER is None, reason="llama-server is not built here: make llama-server (make setup runs it)"
    ),
    pytest.mark.slow,
]
TEMPLATE = f"{LLAMA_SERVER} -m {{model}} --host {{host}} --port {{port}} -t 1 -c 1024 {{arm_flags}}"
"""The flavour's own command, with one thread (the tests share two cores) and a small context."""


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    """Three passkey cases of ~150 prompt tokens (12 new tokens), frozen for the model's tokenizer: their
    prompts share a prefix, which a slot cache left on would serve the next case from."""
    return list(passkey_cases(model_folder, 160, (0.2, 0.8), per_cell=2, max_new_tokens=12)[:3])


@dataclass
class Pass:
    generations: list[Generation]
    command: list[str]
    record: dict[str, Any]


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kvgate-llama-server-") as folder:
        yield Path(folder)


def run(
    treatment: Treatment,
    cases: list[Case],
    run_dir: Path,
    flavour: LlamaServer | None = None,
    passes: int = 1,
) -> Pass:
    engine = ServerEngine(
        resolve_model("smollm2-135m"), flavour="llama-server", command=TEMPLATE, ready_s=120.0
    )
    if flavour is not None:
        engine.flavour = flavour
    session: ServerSession = engine.open(
        ArmSetup(treatment.name, 0, treatment, f"test:{treatment.name}", run_dir=run_dir)
    )
    try:
        generations = [g for _ in range(passes) for g in session.generate(cases)]
        command, stem = list(session.command or ()), session.stem
    finally:
        session.close()
    record = json.loads((run_dir / "server" / f"{stem}.json").read_text())
    return Pass(generations, command, record)


@pytest.fixture(scope="module")
def control(cases: list[Case], run_dir: Path) -> Pass:
    return run(Full("full"), cases, run_dir, passes=2)


def test_the_control_reuses_nothing_across_cases(control: Pass, cases: list[Case]) -> None:
    """Every prompt sent twice to one slot, and not a token served from a cache: each answer's cache_n is
    0 and so is the rise of the server's own total; the KV stayed in f16, as the server logged."""
    assert all(g.error is None for g in control.generations), [g.error for g in control.generations]
    assert [g.n_cached_tokens for g in control.generations] == [0] * 2 * len(cases)
    assert [g.n_prompt_tokens for g in control.generations[: len(cases)]] == [
        len(c.prompt_token_ids or ()) for c in cases
    ]
    assert control.record["cached_tokens_total"] == 0
    assert "--cache-ram" in control.command and "--cache-type-k" not in control.command
    assert {g.kv_dtype for g in control.generations} == {"f16"}
    answers = [g.output_text for g in control.generations[: len(cases)]]
    answered = sum(str(c.expected[0]) in a for c, a in zip(cases, answers, strict=True))
    assert answered >= 2, answers


def test_the_recorded_version_is_the_binarys(control: Pass) -> None:
    """The pass records the version the server answered at /props (build_info, "b<build>-<commit>"):
    the build and commit the binary itself prints for --version."""
    assert LLAMA_SERVER is not None
    printed = subprocess.run([LLAMA_SERVER, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"\(build (\d+), commit (\w+)\)", printed.stdout + printed.stderr)
    assert found is not None, printed.stdout + printed.stderr
    assert control.record["stack_version"] == {
        "stack": "llama-server", "version": f"b{found[1]}-{found[2]}", "source": "GET /props build_info",
    }  # fmt: skip


def test_a_q8_0_cache_is_the_one_the_server_allocated(
    control: Pass, cases: list[Case], run_dir: Path
) -> None:
    q8 = run(Quantize("kv-q8_0", dtype="q8_0"), cases, run_dir)
    assert q8.command[-6:] == ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--flash-attn", "on"]
    assert {g.kv_dtype for g in q8.generations} == {"q8_0"}
    assert [g.n_cached_tokens for g in q8.generations] == [0] * len(cases)
    f16_bytes = [g.kv_bytes for g in control.generations[: len(cases)]]
    q8_bytes = [g.kv_bytes for g in q8.generations]
    # q8_0 stores 32 values in 34 bytes, f16 in 64: 17/32 of the control's bytes per cached token.
    assert None not in f16_bytes and None not in q8_bytes
    assert all(abs(b / a - 17 / 32) < 0.01 for a, b in zip(f16_bytes, q8_bytes, strict=True))


def test_prefix_reuse_is_served_from_the_slot_and_answers_as_the_control(
    control: Pass, cases: list[Case], run_dir: Path
) -> None:
    reuse = run(Reuse("prefix-reuse"), cases, run_dir)
    assert all(g.n_cached_tokens > 0 for g in reuse.generations)
    assert reuse.record["cached_tokens_total"] >= sum(g.n_cached_tokens for g in reuse.generations)
    assert [g.output_token_ids for g in reuse.generations] == [
        g.output_token_ids for g in control.generations[: len(cases)]
    ]


def test_a_disk_offload_arm_is_served_from_its_restored_slot(
    control: Pass, cases: list[Case], run_dir: Path
) -> None:
    """Each case's slot saved to a file, erased and restored by the server (its n_saved, n_restored), the
    measured request served from it, and the same tokens as the control's."""
    arm = Composite("reuse+offload-disk", of=(Reuse("prefix-reuse"), Offload("offload-disk", tier="disk")))
    offload = run(arm, cases, run_dir)
    assert "--slot-save-path" in offload.command and "--cache-ram" in offload.command
    assert all(g.error is None for g in offload.generations), [g.error for g in offload.generations]
    assert all((g.n_tier_written or 0) > 0 and (g.n_tier_read or 0) > 0 for g in offload.generations)
    assert all(g.n_cached_tokens == g.n_prompt_tokens - 1 for g in offload.generations)
    assert [g.output_token_ids for g in offload.generations] == [
        g.output_token_ids for g in control.generations[: len(cases)]
    ]


@dataclass(frozen=True)
class LeavesItsCacheOn(LlamaServer):
    """A planted fault: every request asks for the slot cache, llama-server's default."""

    def request(
        self, model_id: str, prompt: list[int], max_tokens: int, salt: str, measured: bool, reuse: bool
    ) -> tuple[str, dict[str, Any]]:
        return super().request(model_id, prompt, max_tokens, salt, measured, reuse=True)


def test_a_slot_cache_left_on_in_the_control_is_caught(cases: list[Case], run_dir: Path) -> None:
    """The second case's prompt shares the first's prefix; the server's own counter says it was served
    from the slot, and the session fails the control."""
    with pytest.raises(EngineFailure, match="may not reuse KV, yet the engine served"):
        run(Full("full"), cases, run_dir, flavour=LeavesItsCacheOn("llama-server"))


@dataclass(frozen=True)
class HidesItsHits(LeavesItsCacheOn):
    """A planted fault: the slot cache on, and answers that say they read nothing from it."""

    def parse(self, body: Any, n_prompt: int) -> Completion:
        return replace(super().parse(body, n_prompt), cached_tokens=0)


def test_hits_the_answers_hide_are_caught_by_the_servers_own_total(cases: list[Case], run_dir: Path) -> None:
    """Every answer claims 0 cached tokens; /metrics' llamacpp:prompt_tokens_cached_total says otherwise."""
    with pytest.raises(EngineFailure, match=r"the server's /metrics counts [1-9][0-9]* prompt tokens"):
        run(Full("full"), cases, run_dir, flavour=HidesItsHits("llama-server"))
