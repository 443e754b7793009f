"""A deterministic engine with planted faults, for tests and for measuring the gate itself.

Without faults every arm answers each case with its reference answer. Faults are chosen per arm in the
matrix spec (`[faults.<arm>]`, or `[faults."*"]` for every arm) and hit a seeded, arm-independent share
of cases, so the same fault at the same seed hits the same cases in every arm:

- wrong_answer_rate: answer "I do not know." instead;
- leak_rate: answer with the previous case's reference answer (another request's KV);
- stale_reuse_rate: on reuse arms, answer with the stored answer of the earlier prompt that shares the
  longest prefix (a reused entry that should not have matched);
- error_rate: the engine fails on the case;
- salt_leak: sessions share one prefix store across namespaces, so cache hits show where none may;
- latency_s: added to every case (at most MAX_LATENCY_S, 60 s); with `-E timeout_s=S` below it, the
  case waits S seconds and is stored as a timeout;
- crash_after: the session raises after generating this many cases (a crashed engine, not a per-case
  error; a resumed run gets that many more cases done per session);
- exit_after: the process running the session ends at once (exit code 137, as if killed) when it is
  about to generate past this many cases, once per pass of a run (a marker named by the pass's namespace
  is left in the temp folder): a lost worker or machine. Locally that ends `kvgate run` itself;
- only_slice: a slice named as the policy names them (`ctx_bucket=4k`, `task=qa/ctx_bucket=4k`,
  `critical`): the four rates above hit only cases in that slice, each at its rate there (overall, the
  rate times the slice's share of the cases); latency and crashes are not restricted. A malformed name
  is refused when the matrix is read, a slice no case of the run is in when the run starts;
- ignore_treatment: the arm's treatment silently does not run (a planted no-op): the arm answers and
  counts exactly as the control would, so its proof of treatment must be missing;
- stale_after_abort: a case sent again after its request was cancelled (the `abort_percent` schedule)
  is answered with the answer given last (another request's KV read after an abort);
- stale_after_churn: a case generated again after the cache was churned (`resend_percent`, `repeat`)
  is answered likewise (a block reloaded from the wrong place). Both hit only under their schedule.

Stress schedules (`engines/schedule.py`): an aborted request is counted and frees what it stored (its
prompt is not kept in the arm's store); interleaved requests go to a store of the other namespace (the
shared one under salt_leak); churn evicts the batch's own prompts from the arm's store, so a re-sent
or repeated case meets the cache the earlier cases left. A pass that runs a schedule leaves a pass record
(`server/record.py`, form "in-process") with its counts.

Cache counters: a reuse arm reports the longest prefix it shares with a prompt it saw earlier in its
session; every other arm reports 0, unless salt_leak lets namespaces see each other.

Evidence of treatment (`Generation`), for a model shaped like SmolLM2-135M (30 layers, 3 KV heads of 64
dimensions, bfloat16: KV_BYTES_PER_ENTRY per cached position): eviction keeps n − int(ratio·n) of the
prompt's n entries; quantisation stores every prompt and generated position in FP8 (half the bytes); a
span-reuse arm counts one span per case that found a stored prompt sharing its start; offload writes
every block of `block_size` kept entries to its tier and reads back only the blocks that did not fit the
arm's KV pool (the matrix's `kv_blocks`, in blocks of the same size): without pressure, nothing is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.case_timeout import check_timeout
from kvgate.engines.registry import registered_name
from kvgate.engines.schedule import ScheduleCounts, pass_attempt, run_schedule, schedule_load, scheduled
from kvgate.engines.server.record import next_session, write_record
from kvgate.errors import BadInput
from kvgate.gate.feasibility import slice_members
from kvgate.gate.policy import slice_terms
from kvgate.models import ModelSpec
from kvgate.treatments.faults import RATES, check_faults
from kvgate.treatments.spec import Eviction, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case, case_labels

KV_BYTES_PER_ENTRY = 2 * 30 * 3 * 64 * 2
"""Keys and values × layers × KV heads × head dimension × bytes of a bfloat16 element."""
LOST_EXIT_CODE = 137
_SHARED_STORE: dict[tuple[int, ...], str] = {}


def reference_answer(case: Case) -> str:
    """What a perfect model would answer: `validator_args["reference"]`, else the expectation as text."""
    if "reference" in case.validator_args:
        return str(case.validator_args["reference"])
    if isinstance(case.expected, str):
        return case.expected
    if isinstance(case.expected, list) and all(isinstance(e, str) for e in case.expected):
        return " ".join(case.expected)
    return json.dumps(case.expected)


def hits(fault: str, rate: float, seed: int, case_id: str) -> bool:
    """Whether `fault` at `rate` hits `case_id`: a seeded hash, independent of the arm."""
    if rate <= 0:
        return False
    digest = hashlib.sha256(f"{fault}:{seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def _tokens(text: str) -> tuple[int, ...]:
    return tuple(zlib.crc32(w.encode()) & 0x7FFFFFFF for w in text.split())


def check_fault_slices(faults: Mapping[str, Mapping[str, Any]], cases: Sequence[Case], where: str) -> None:
    """BadInput naming the first `only_slice` (per arm of `faults`) that no case of `cases` is in."""
    rows = [(case_labels(c), c.critical) for c in cases]
    columns = sorted({column for labels, _ in rows for column in labels})
    for arm, table in faults.items():
        name = table.get("only_slice")
        if name is None:
            continue
        for column, _ in slice_terms(name):
            if column not in columns:
                raise BadInput(
                    f"[faults.{arm}] only_slice {name!r}: {where} has no slice column {column!r}; "
                    f"known: {', '.join(columns)}"
                )
        if not any(slice_members(name, labels, critical) for labels, critical in rows):
            raise BadInput(f"[faults.{arm}] only_slice {name!r}: no case of {where} is in that slice")


@dataclass
class FakeSession:
    """One arm's session: its own prefix store (its namespace), shared only under salt_leak."""

    setup: ArmSetup
    timeout_s: float | None = None
    store: dict[tuple[int, ...], str] = field(default_factory=dict)
    previous: str = "nothing"
    generated: int = 0
    requests: int = 0
    counts: ScheduleCounts = field(default_factory=ScheduleCounts)
    other: dict[tuple[int, ...], str] = field(default_factory=dict)
    """The other namespace's store (interleaving)."""
    stale: set[str] = field(default_factory=set)
    """Case ids whose next answer a planted stale_after_* fault replaces."""

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        crash_after = self.setup.faults.get("crash_after")
        if crash_after is not None and self.generated + len(cases) > crash_after:
            raise RuntimeError(f"planted engine crash after {crash_after} cases")
        exit_after = self.setup.faults.get("exit_after")
        if exit_after is not None and self.generated + len(cases) > exit_after:
            _exit_once(self.setup.namespace)
        self.generated += len(cases)
        if scheduled(self.setup):
            return run_schedule(self.setup, cases, self, self.counts)
        return [self._one(case) for case in cases]

    # --- the stress schedules' operations (engines/schedule.py) -------------------------------------

    def measure(self, cases: Sequence[Case], warm: bool) -> list[Generation]:
        return [self._one(case) for case in cases]

    def abort(self, cases: Sequence[Case]) -> int:
        if self.setup.faults.get("stale_after_abort"):
            self.stale.update(c.case_id for c in cases)
        return len(cases)

    def interleave(self, cases: Sequence[Case]) -> None:
        store = _SHARED_STORE if self.setup.faults.get("salt_leak") else self.other
        for case in cases:
            store[tuple(case.prompt_token_ids or ())] = reference_answer(case)

    def churn(self, cases: Sequence[Case]) -> int:
        for case in cases:  # their blocks evicted by other traffic
            self.store.pop(tuple(case.prompt_token_ids or ()), None)
        if self.setup.faults.get("stale_after_churn"):
            self.stale.update(c.case_id for c in cases)
        return len(cases)

    def _one(self, case: Case) -> Generation:
        self.requests += 1
        faults = self.setup.faults
        seed = int(faults.get("seed", 0))
        start = time.perf_counter()
        latency, limit = float(faults.get("latency_s", 0.0)), self.timeout_s
        if limit is not None and latency > limit:
            time.sleep(limit)
            return Generation.timeout(case, limit, time.perf_counter() - start)
        time.sleep(latency)
        only = faults.get("only_slice")
        if only is not None and not slice_members(only, case_labels(case), case.critical):
            faults = {k: v for k, v in faults.items() if k not in RATES}
        if hits("error", float(faults.get("error_rate", 0.0)), seed, case.case_id):
            return Generation.failed(case, "planted engine error")
        prompt = tuple(case.prompt_token_ids or ())
        parts = [] if faults.get("ignore_treatment") else self.setup.treatment.parts()
        reuses = any(p.kind == "reuse" for p in parts)
        store = _SHARED_STORE if faults.get("salt_leak") else self.store
        cached, nearest = _longest_prefix(store, prompt) if (reuses or faults.get("salt_leak")) else (0, None)
        answer = reference_answer(case)
        if hits("wrong", float(faults.get("wrong_answer_rate", 0.0)), seed, case.case_id):
            answer = "I do not know."
        elif hits("leak", float(faults.get("leak_rate", 0.0)), seed, case.case_id):
            answer = self.previous
        elif (
            reuses
            and nearest is not None
            and hits("stale", float(faults.get("stale_reuse_rate", 0.0)), seed, case.case_id)
        ):
            answer = nearest
        elif case.case_id in self.stale:
            self.stale.discard(case.case_id)
            answer = self.previous if self.previous != reference_answer(case) else "I do not know."
        store[prompt] = reference_answer(case)
        self.previous = reference_answer(case)
        tokens = _tokens(answer)
        evidence = _evidence(parts, len(prompt), len(tokens), cached, self.setup.kv_blocks)
        elapsed = time.perf_counter() - start
        return Generation(
            answer, tokens, len(prompt), cached, evidence.pop("kept"), elapsed / 2, elapsed, -0.1, -0.5,
            **evidence,
        )  # fmt: skip

    def close(self) -> None:
        self.store.clear()
        run_dir = self.setup.run_dir
        if run_dir is not None and scheduled(self.setup):
            write_record(run_dir, self._record(run_dir))

    def _record(self, run_dir: Path) -> dict[str, Any]:
        """The pass record of a scheduled pass (`server/record.py`)."""
        setup = self.setup
        attempt = pass_attempt(setup)
        return {
            "schema": "kvgate.server-pass/1", "arm": setup.arm, "replicate": setup.replicate,
            "attempt": attempt, "session": next_session(run_dir, setup.arm, setup.replicate, attempt),
            "form": "in-process", "url": "", "concurrency": setup.concurrency, "kv_blocks": setup.kv_blocks,
            "requests": self.requests, "retried": {}, "timeouts": 0, "preemptions": None,
            "load": schedule_load(setup), **self.counts.as_record(), "wall_s": 0.0,
        }  # fmt: skip


def _evidence(
    parts: Sequence[Any], n_prompt: int, n_output: int, cached: int, kv_blocks: int | None
) -> dict[str, Any]:
    """What the treatment `parts` leave in the counters for one case (the module's docstring)."""
    kept, bytes_per_entry, dtype = n_prompt, KV_BYTES_PER_ENTRY, "bfloat16"
    quantized = written = read = spans = 0
    for part in parts:
        if isinstance(part, Eviction):
            kept -= int(part.ratio * kept)
        elif isinstance(part, Quantize):
            bytes_per_entry, dtype, quantized = KV_BYTES_PER_ENTRY // 2, part.dtype, kept + n_output
        elif isinstance(part, Offload):
            written = -(-kept // part.block_size)
            read = max(0, written - kv_blocks) if kv_blocks is not None else 0
        elif isinstance(part, Reuse) and part.mode == "span":
            spans = int(cached > 0)
    return {
        "kept": kept,
        "kv_bytes": kept * bytes_per_entry,
        "kv_dtype": dtype,
        "n_kv_quantized": quantized,
        "n_tier_written": written,
        "n_tier_read": read,
        "n_spans_reused": spans,
    }


def _exit_once(namespace: str) -> None:
    """End this process at once unless a session of the same pass did already (the lost worker)."""
    marker = (
        Path(tempfile.gettempdir())
        / f"kvgate-fake-exit-{hashlib.sha256(namespace.encode()).hexdigest()[:16]}"
    )
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return
    os._exit(LOST_EXIT_CODE)


def _longest_prefix(store: dict[tuple[int, ...], str], prompt: tuple[int, ...]) -> tuple[int, str | None]:
    """The longest prefix `prompt` shares with a stored prompt, and that prompt's answer (None if none)."""
    best, answer = 0, None
    for seen, seen_answer in store.items():
        n = 0
        for a, b in zip(seen, prompt, strict=False):
            if a != b:
                break
            n += 1
        if n > best:
            best, answer = n, seen_answer
    return best, answer


class FakeEngine:
    """The fake engine; `model` is recorded but never loaded. Its one option: `timeout_s`."""

    name = registered_name(__module__, __qualname__)

    def __init__(self, model: ModelSpec, timeout_s: float | None = None, **options: Any) -> None:
        if options:
            raise BadInput(f"engine 'fake' takes only -E timeout_s, got {', '.join(sorted(options))}")
        self.model = model
        self.timeout_s = check_timeout("fake", timeout_s)

    def refusal(self, treatment: Treatment) -> str | None:
        if any(isinstance(part, Eviction) and part.certificate for part in treatment.parts()):
            return "the attention-error certificate needs the hf engine"
        return None

    def fingerprint(self) -> dict[str, Any]:
        limit = {"timeout_s": self.timeout_s} if self.timeout_s is not None else {}
        return {"engine": self.name, "version": "2", **limit}

    def open(self, setup: ArmSetup) -> FakeSession:
        check_faults(setup.faults, f"faults of arm {setup.arm!r}")
        return FakeSession(setup, self.timeout_s)

    def close(self) -> None:
        _SHARED_STORE.clear()
