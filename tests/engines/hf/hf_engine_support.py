"""Shared by the hf engine's model tests: one engine per test session, short cases, one arm run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import torch
from helpers.passkey_cases import passkey_cases as frozen_passkey_cases

from kvgate.engines.base import ArmSetup, Generation
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case


@cache
def shared_engine() -> Any:
    """The hf engine on the embedded model, loaded once; sessions never share cached KV, so tests may."""
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    return HFEngine(resolve_model("smollm2-135m"))


@contextmanager
def one_thread() -> Iterator[None]:
    """Both arms of a comparison on one thread: alike, and quick on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def passkey_cases(folder: Path, depths: tuple[float, ...], per_cell: int, seed: int) -> tuple[Case, ...]:
    """Short passkey cases (~150 prompt tokens, 8 new tokens) frozen for the model's tokenizer."""
    return frozen_passkey_cases(folder, 160, depths, per_cell, max_new_tokens=8, seed=seed)


def run_arm(
    engine: Any,
    treatment: Treatment,
    cases: list[Case],
    namespace: str = "",
    faults: dict[str, Any] | None = None,
) -> list[Generation]:
    """Every case through one fresh session of `treatment` (closed afterwards)."""
    setup = ArmSetup(treatment.name, 0, treatment, namespace or f"test:{treatment.name}", faults=faults or {})
    session = engine.open(setup)
    try:
        return list(session.generate(cases))
    finally:
        session.close()
