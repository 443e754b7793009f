"""Shared by the hf engine's model tests: one engine per test session, short cases, one arm run."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import torch

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


@cache
def passkey_cases(folder: Path, depths: tuple[float, ...], per_cell: int, seed: int) -> tuple[Case, ...]:
    """Short passkey cases (~150 prompt tokens, 8 new tokens) frozen for the model's tokenizer."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer
    from kvgate.workload.suites import parse_suite

    with tempfile.TemporaryDirectory() as scratch:
        spec = Path(scratch) / "tiny.toml"
        spec.write_text(
            'name = "tiny"\n[[generate]]\ngenerator = "passkey"\nlengths = [160]\n'
            f"depths = {list(depths)}\nper_cell = {per_cell}\nmax_new_tokens = 8\n"
        )
        suite = parse_suite(spec)
    tok = HFPromptTokenizer.from_folder(folder, "smollm2-135m")
    return tuple(freeze_cases([suite], tok, seed=seed))


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
