"""A deterministic engine with planted faults, for tests and for measuring the gate itself.

Without faults every arm answers each case with its reference answer. Faults are chosen per arm in the
matrix spec (`[faults.<arm>]`, or `[faults."*"]` for every arm) and hit a seeded, arm-independent share
of cases, so the same fault at the same seed hits the same cases in every arm:

- wrong_answer_rate: answer "I do not know." instead;
- leak_rate: answer with the previous case's reference answer (another request's KV);
- stale_reuse_rate: on reuse arms, answer with the first answer seen in the case's prefix group;
- error_rate: the engine fails on the case;
- salt_leak: sessions share one prefix store across namespaces, so cache hits show where none may;
- latency_s: added to every case.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvgate.engines.base import ArmSetup, Generation
from kvgate.errors import BadInput
from kvgate.models import ModelSpec
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case

FAULT_KEYS = {"wrong_answer_rate", "leak_rate", "stale_reuse_rate", "error_rate", "salt_leak", "latency_s", "seed"}
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


def check_faults(faults: dict[str, Any], where: str) -> None:
    for key, value in faults.items():
        if key not in FAULT_KEYS:
            raise BadInput(f"{where}: unknown fault {key!r}; known: {', '.join(sorted(FAULT_KEYS))}")
        if key.endswith("_rate") and not (isinstance(value, int | float) and 0 <= value <= 1):
            raise BadInput(f"{where}: {key} must be in [0, 1], got {value!r}")


@dataclass
class FakeSession:
    setup: ArmSetup
    store: dict[tuple[int, ...], str] = field(default_factory=dict)
    group_first: dict[str, str] = field(default_factory=dict)
    previous: str = "nothing"

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        return [self._one(case) for case in cases]

    def _one(self, case: Case) -> Generation:
        faults, seed = self.setup.faults, int(self.setup.faults.get("seed", 0))
        start = time.perf_counter()
        time.sleep(float(faults.get("latency_s", 0.0)))
        if hits("error", float(faults.get("error_rate", 0.0)), seed, case.case_id):
            return Generation.failed(case, "planted engine error")
        answer = reference_answer(case)
        is_reuse = any(p.kind == "reuse" for p in self.setup.treatment.parts())
        group = case.prefix_group
        if hits("wrong", float(faults.get("wrong_answer_rate", 0.0)), seed, case.case_id):
            answer = "I do not know."
        elif hits("leak", float(faults.get("leak_rate", 0.0)), seed, case.case_id):
            answer = self.previous
        elif (
            is_reuse
            and group in self.group_first
            and hits("stale", float(faults.get("stale_reuse_rate", 0.0)), seed, case.case_id)
        ):
            answer = self.group_first[group]
        if group is not None:
            self.group_first.setdefault(group, reference_answer(case))
        self.previous = reference_answer(case)
        prompt = tuple(case.prompt_token_ids or ())
        store = _SHARED_STORE if faults.get("salt_leak") else self.store
        cached = _longest_prefix(store, prompt) if (is_reuse or faults.get("salt_leak")) else 0
        store[prompt] = answer
        tokens = _tokens(answer)
        kept = len(prompt) if self.setup.treatment.kind != "eviction" else len(prompt) // 2
        elapsed = time.perf_counter() - start
        return Generation(answer, tokens, len(prompt), cached, kept, elapsed / 2, elapsed, -0.1, -0.5)

    def close(self) -> None:
        self.store.clear()


def _longest_prefix(store: dict[tuple[int, ...], str], prompt: tuple[int, ...]) -> int:
    best = 0
    for seen in store:
        n = 0
        for a, b in zip(seen, prompt, strict=False):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return best


class FakeEngine:
    """The fake engine; `model` is recorded but never loaded."""

    name = "fake"

    def __init__(self, model: ModelSpec, **options: Any) -> None:
        self.model = model

    def refusal(self, treatment: Treatment) -> str | None:
        return None

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": "fake", "version": "1"}

    def open(self, setup: ArmSetup) -> FakeSession:
        check_faults(setup.faults, f"faults of arm {setup.arm!r}")
        return FakeSession(setup)

    def close(self) -> None:
        _SHARED_STORE.clear()
