"""Server sessions against the stub in a thread: answers land in their case's place under concurrency,
timeouts, retried transport errors, malformed answers, a salt that leaks, a server that goes away."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
from stub_server import StubServer, start_stub

from kvgate.engines.base import ArmSetup
from kvgate.engines.fake import reference_answer
from kvgate.engines.schedule import chosen
from kvgate.engines.server.engine import ServerEngine
from kvgate.engines.server.record import read_records
from kvgate.engines.server.session import ServerSession
from kvgate.errors import BadInput, EngineFailure
from kvgate.models import resolve_model
from kvgate.runner.passes import ArmRun
from kvgate.runner.rows import result_row
from kvgate.treatments.spec import Full, Reuse, Treatment
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload


@pytest.fixture(scope="module")
def cases(smoke_workload: Path) -> tuple[Case, ...]:
    return read_workload(smoke_workload).cases


@pytest.fixture
def served(answers: dict[str, str]) -> Iterator[Any]:
    """A factory of stubs, all stopped after the test."""
    started: list[StubServer] = []

    def make(**options: Any) -> StubServer:
        started.append(start_stub(answers, **options))
        return started[-1]

    yield make
    for server in started:
        server.stop()


CONTROL = Full("full")


def open_session(
    model: Path, url: str, treatment: Treatment = CONTROL, concurrency: int = 1, run_dir: Path | None = None,
    **options: Any,
) -> ServerSession:  # fmt: skip
    engine = ServerEngine(resolve_model(str(model)), endpoints={"*": url}, backoff_s=0.01, **options)
    setup = ArmSetup(treatment.name, 0, treatment, f"kvgate-ns:t:{treatment.name}:r0:a0",
                     batch_size=24, concurrency=concurrency, run_dir=run_dir)  # fmt: skip
    return engine.open(setup)


def test_answers_land_in_their_cases_place_whatever_order_they_complete_in(
    served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    stub = served(latency_s=0.001, slow_share=0.5, slow_s=0.05, seed=3)  # half the cases finish late
    session = open_session(stub_model, stub.url, concurrency=8, run_dir=tmp_path)
    generations = session.generate(cases)
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases]
    assert all(
        g.n_prompt_tokens == len(c.prompt_token_ids or ()) for g, c in zip(generations, cases, strict=True)
    )
    (record,) = read_records(tmp_path)
    assert record["requests"] == len(cases) and record["concurrency"] == 8 and record["form"] == "endpoint"


def test_a_case_past_the_time_limit_is_a_timeout_of_that_case(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    stub = served(slow_share=0.3, slow_s=2.0, seed=1)
    session = open_session(stub_model, stub.url, concurrency=8, timeout_s=0.5)
    generations = session.generate(cases[:8])
    session.close()
    timed_out = [g for g in generations if g.timed_out]
    assert 0 < len(timed_out) < 8 and all(g.latency_s < 1.5 for g in timed_out)
    arm_run = ArmRun(Full("full"), 0, 0, cases[:8])
    kinds = {
        result_row(c, g, arm_run, None)["fail_kind"] for c, g in zip(cases[:8], generations, strict=True)
    }
    assert "timeout" in kinds and "engine_error" not in kinds


@pytest.mark.parametrize("flaky", ["503", "reset"])
def test_transient_errors_are_retried_and_the_attempts_recorded(
    flaky: str, served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    stub = served(flaky=flaky)
    session = open_session(stub_model, stub.url, concurrency=4, run_dir=tmp_path)
    generations = session.generate(cases[:6])
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases[:6]]
    (record,) = read_records(tmp_path)
    assert record["retried"] == {c.case_id: 2 for c in cases[:6]}


def test_retries_run_out_on_a_server_that_went_away(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    stub = served()
    session = open_session(stub_model, stub.url, retries=2)
    stub.stop()
    with pytest.raises(EngineFailure, match=f"case {cases[0].case_id}: .* failed 3 attempts"):
        session.generate(cases[:1])
    session.close()


def test_a_malformed_answer_is_an_engine_error_naming_the_case(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    stub = served(malformed_share=1.0)
    session = open_session(stub_model, stub.url)
    (generation,) = session.generate(cases[:1])
    session.close()
    assert generation.error is not None and not generation.timed_out
    assert (
        f"malformed response for case {cases[0].case_id}: choices[0].token_ids is missing" in generation.error
    )


def test_reuse_reads_its_own_cache_and_a_leaking_salt_is_caught(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    session = open_session(stub_model, served(prefix_caching=True).url, Reuse("prefix-reuse"), block_size=16)
    generations = session.generate(cases[:4])
    session.close()
    assert all(g.n_cached_tokens > 0 for g in generations)  # the warm-up filled the arm's own cache
    leaky = open_session(stub_model, served(prefix_caching=True, leak_salt=True).url, Reuse("prefix-reuse"))
    with pytest.raises(EngineFailure, match="cache_salt does not isolate namespaces"):
        leaky.generate(cases[:4])
    leaky.close()
    control = open_session(stub_model, served(prefix_caching=True).url)
    with pytest.raises(EngineFailure, match="may not reuse KV"):
        control.generate(cases[:4])  # the smoke prompts share a prefix: a control that caches hits it
    control.close()


def planted_divergences(
    served: Any, stub_model: Path, cases: tuple[Case, ...], seed: int, concurrency: int
) -> int:
    stub = served(latency_s=0.03, fault_k=2, fault_share=0.4, seed=seed)  # long enough to overlap
    session = open_session(stub_model, stub.url, concurrency=concurrency)
    generations = session.generate(cases[:12])
    session.close()
    stub.stop()
    return sum(g.output_text != reference_answer(c) for g, c in zip(generations, cases[:12], strict=True))


def test_the_planted_race_shows_at_concurrency_k_or_more_and_never_at_1(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    seeds = range(20)
    caught = [planted_divergences(served, stub_model, cases, seed, concurrency=4) > 0 for seed in seeds]
    assert sum(caught) >= 19, caught  # ≥ 95% of seeded runs
    assert all(planted_divergences(served, stub_model, cases, seed, concurrency=1) == 0 for seed in seeds[:3])


def test_a_pass_record_is_never_written_through_a_planted_server_link(
    served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """A run's `server/` made a link elsewhere: closing the session refuses to write its record there."""
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    (run_dir / "server").symlink_to(outside)
    session = open_session(stub_model, served().url, run_dir=run_dir)
    session.generate(cases[:2])
    with pytest.raises(
        BadInput, match="server is a link: kvgate writes a run's files only inside its folder"
    ):
        session.close()
    assert list(outside.iterdir()) == []


def test_rows_carry_the_kv_dtype_and_bytes_the_server_reports(
    served: Any, stub_model: Path, cases: tuple[Case, ...]
) -> None:
    """vllm:cache_config_info's labels: an FP8 cache buys four times float32's tokens for the same budget;
    a server that ignores --kv-cache-dtype reports the control's dtype and bytes (the proof then fails)."""
    from kvgate.treatments.spec import Quantize

    fp8 = Quantize("fp8-e4m3", dtype="fp8_e4m3")
    rows = {}
    for name, stub in (
        ("control", served(dtype="float32")),
        ("fp8", served(dtype="float32", kv_cache_dtype="fp8_e4m3")),
        ("ignored", served(dtype="float32", kv_cache_dtype="fp8_e4m3", ignore_kv_cache_dtype=True)),
    ):
        session = open_session(stub_model, stub.url, CONTROL if name == "control" else fp8)
        rows[name] = session.generate(cases[:2])
        session.close()
    n = rows["control"][0].n_prompt_tokens
    assert [g.kv_dtype for g in rows["control"]] == ["auto", "auto"]  # a given endpoint names no --dtype
    assert [g.kv_dtype for g in rows["fp8"]] == ["fp8_e4m3", "fp8_e4m3"]
    control_bytes, fp8_bytes = rows["control"][0].kv_bytes, rows["fp8"][0].kv_bytes
    assert control_bytes is not None and fp8_bytes is not None
    assert control_bytes == pytest.approx(n * 2 * 30 * 3 * 64 * 4, rel=0.01)
    assert fp8_bytes == pytest.approx(control_bytes / 4, rel=0.01)
    assert [(g.kv_dtype, g.kv_bytes) for g in rows["ignored"]] == [
        (g.kv_dtype, g.kv_bytes) for g in rows["control"]
    ]


def test_the_abort_schedule_catches_a_server_that_answers_a_resubmitted_request_wrongly(
    served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    """Planted: after an abort, the same prompt is answered with the last other request's output. The
    abort-and-resubmit schedule (abort_percent) exposes it in at least 19 of 20 seeds; without it, never.
    The sessions without aborts run on a twin stub answering well inside ABORT_AFTER_S (nothing there is
    cancelled whatever the latency), eight requests still in flight at once."""
    model = resolve_model(str(stub_model))
    slow = served(latency_s=0.6, stale_after_abort=True)  # still serving when the client goes away
    quick = served(latency_s=0.05, stale_after_abort=True)
    engines = {x.url: ServerEngine(model, endpoints={"*": x.url}, backoff_s=0.01) for x in (slow, quick)}
    expected = [reference_answer(c) for c in cases[:8]]

    def wrong_answers(seed: int, abort_percent: int) -> tuple[int, int]:
        engine = engines[slow.url if abort_percent else quick.url]
        namespace = f"kvgate-ns:t:full:s{seed}:p{abort_percent}:r0:a0"
        setup = ArmSetup("full", 0, CONTROL, namespace, batch_size=8, seed=seed, concurrency=8,
                         abort_percent=abort_percent, run_dir=tmp_path)  # fmt: skip
        session = engine.open(setup)
        answers = [g.output_text for g in session.generate(cases[:8])]
        aborts = session.counts.aborts
        session.close()
        return sum(a != e for a, e in zip(answers, expected, strict=True)), aborts

    stressed = [wrong_answers(seed, 50) for seed in range(20)]
    assert sum(wrong > 0 for wrong, _ in stressed) >= 19
    assert all(wrong <= aborts for wrong, aborts in stressed)  # only resubmitted requests go wrong
    assert sum(wrong_answers(seed, 0)[0] for seed in range(20)) == 0
    assert {r["aborts"] for r in read_records(tmp_path) if r["aborts"]} and all(
        "aborts" in r for r in read_records(tmp_path)
    )
    for engine in engines.values():
        engine.close()


def test_a_resubmitted_request_carries_the_request_id_of_the_one_aborted(
    served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path
) -> None:
    stub = served(latency_s=0.6)  # still serving when the client goes away
    engine = ServerEngine(resolve_model(str(stub_model)), endpoints={"*": stub.url}, backoff_s=0.01)
    setup = ArmSetup("full", 0, CONTROL, "kvgate-ns:t:full:r0:a0", batch_size=8, concurrency=8,
                     abort_percent=50, run_dir=tmp_path)  # fmt: skip
    session = engine.open(setup)
    generations = session.generate(cases[:8])
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases[:8]]
    aborted, answered = stub.state.aborted_ids, stub.state.answered_ids
    assert set(answered) == {f"kvgate-ns:t:full:r0:a0:{c.case_id}" for c in cases[:8]} and len(answered) == 8
    assert aborted and set(aborted) <= set(answered)  # each resubmission under the id of the one aborted
    (record,) = read_records(tmp_path)
    assert record["aborts"] == len(aborted) and record["load"] == {"abort_percent": 50}
    engine.close()


@pytest.mark.parametrize(
    ("load", "counted"),
    [
        ({"interleave": True}, {"interleaved": 8}),
        ({"resend_percent": 50}, {"churned": 8}),
        ({"repeat": 3}, {"repeats": 16, "churned": 16, "repeat_changed": 0}),
    ],
)
def test_a_reuse_arm_answers_alike_under_interleaving_re_sends_and_repeats(
    served: Any, stub_model: Path, cases: tuple[Case, ...], tmp_path: Path, load: dict[str, Any],
    counted: dict[str, int],
) -> None:  # fmt: skip
    """A → B → A, a re-send after churn, a soak: the same answers, hits still read, each counted; B's
    requests and the churn go under salts of their own."""
    stub = served(prefix_caching=True)
    reuse = Reuse("prefix-reuse")
    engine = ServerEngine(resolve_model(str(stub_model)), endpoints={"*": stub.url}, backoff_s=0.01)
    setup = ArmSetup("prefix-reuse", 0, reuse, "kvgate-ns:t:prefix-reuse:r0:a0", batch_size=8,
                     concurrency=4, run_dir=tmp_path, **load)  # fmt: skip
    session = engine.open(setup)
    generations = session.generate(cases[:8])
    session.close()
    assert [g.output_text for g in generations] == [reference_answer(c) for c in cases[:8]]
    assert any(g.n_cached_tokens > 0 for g in generations)
    (record,) = read_records(tmp_path)
    assert {k: record[k] for k in counted} == counted and record["load"] == load
    resent = sum(chosen("resend", setup, c.case_id, setup.resend_percent) for c in cases[:8])
    assert record["resent"] == resent and (resent > 0) == ("resend_percent" in load)
    own = "kvgate-ns:t:prefix-reuse:r0:a0"
    extra = {":interleaved": record["interleaved"], ":churn": record["churned"], ":isolation-probe": 1}
    assert {salt for salt, _ in stub.state.cache} == {own} | {own + tail for tail, n in extra.items() if n}
    engine.close()
