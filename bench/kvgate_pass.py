"""kvgate's side of the harness benchmark: the control pass of a run, through the runner's own code.

A matrix file must name at least one candidate, and every candidate generates every case again, so
timing the control arm out of a whole `kvgate run` would pay for a second pass (and, on vLLM, a second
engine start) that the bare script never makes. Instead this builds what `kvgate.runner.job.run_job`
builds — the verified workload, the manifest, the run directory — around a matrix of the control
alone (`Matrix` itself allows that; only the TOML parser insists on a candidate), and calls
`kvgate.runner.run.execute`: the same passes, sessions, validation, result rows and atomic Parquet parts
a real run makes. The engine is wrapped to time its sessions' start, generation and close apart: on vLLM
every arm session starts a fresh `vllm.LLM` and shuts it down, which is model load and teardown,
reported apart as the bare script's are.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate.engines.base import ArmSession, ArmSetup, Engine, Generation
from kvgate.engines.registry import create_engine
from kvgate.gate.policy import load_policy
from kvgate.models import model_identity, resolve_model
from kvgate.rundir.manifest import build_manifest
from kvgate.rundir.store import read_results
from kvgate.runner.context import RunContext
from kvgate.runner.run import execute, open_run
from kvgate.treatments.matrix import Matrix
from kvgate.treatments.spec import Full, Treatment
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload
from kvgate.workload.selection import select_cases


@dataclass
class Clock:
    """Wall and CPU seconds (this process) added up over the calls timed with `timing()`."""

    wall_s: float = 0.0
    cpu_s: float = 0.0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall_s += time.perf_counter() - wall
            self.cpu_s += time.process_time() - cpu


@dataclass
class TimedSession:
    """Delegates to `session`; times its `generate` and `close` on the engine's clocks."""

    session: ArmSession
    engine: TimedEngine

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        with self.engine.generating.timing():
            return self.session.generate(cases)

    def close(self) -> None:
        with self.engine.closing.timing():
            self.session.close()


@dataclass
class TimedEngine:
    """Delegates to `engine`; times arm sessions' start, generation and close apart (vLLM: a session's
    start and close are an LLM's start and shutdown, i.e. model load and teardown)."""

    engine: Engine
    opening: Clock = field(default_factory=Clock)
    generating: Clock = field(default_factory=Clock)
    closing: Clock = field(default_factory=Clock)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.engine.name

    def refusal(self, treatment: Treatment) -> str | None:
        return self.engine.refusal(treatment)

    def fingerprint(self) -> dict[str, Any]:
        return self.engine.fingerprint()

    def open(self, setup: ArmSetup) -> ArmSession:
        with self.opening.timing():
            return TimedSession(self.engine.open(setup), self)

    def close(self) -> None:
        self.engine.close()

    def readings(self) -> tuple[float, ...]:
        return tuple(x for c in (self.opening, self.generating, self.closing) for x in (c.wall_s, c.cpu_s))


def control_only(batch_size: int) -> Matrix:
    return Matrix(
        name="bench-control-only",
        control=Full(name="full"),
        candidates=(),
        aa_replicate=False,
        batch_size=batch_size,
        text='[matrix]\ncontrol = "full"\ncandidates = []\naa_replicate = false\n'
        f"batch_size = {batch_size}\n",
    )


@dataclass(frozen=True)
class PassTiming:
    setup_s: float
    """Workload read and verified, manifest built and written."""
    pass_s: float
    """The control pass as `execute` runs it, session start and close included."""
    pass_cpu_s: float
    """CPU seconds of this process during the pass (the engine's too when it runs in-process)."""
    open_s: float
    """Arm session start (vLLM: a fresh LLM, i.e. model load)."""
    open_cpu_s: float
    engine_generate_s: float
    """Seconds inside the engine session's `generate` calls."""
    engine_generate_cpu_s: float
    close_s: float
    """Arm session close (vLLM: the LLM's shutdown)."""
    close_cpu_s: float
    outputs: list[list[int]]
    """Output token ids per case, in workload order."""

    @property
    def generate_s(self) -> float:
        """The pass without its session's start and close: what a bare script's generation compares with."""
        return self.pass_s - self.open_s - self.close_s

    @property
    def generate_cpu_s(self) -> float:
        return self.pass_cpu_s - self.open_cpu_s - self.close_cpu_s


class KvgateControl:
    """One engine (created once, as a run creates it), control passes into fresh run directories."""

    def __init__(self, engine: str, model: str, engine_options: dict[str, Any] | None = None) -> None:
        self.model = resolve_model(model)
        start = time.perf_counter()
        self.engine = TimedEngine(create_engine(engine, self.model, **(engine_options or {})))
        self.create_s = time.perf_counter() - start
        self.identity = {"name": self.model.name} if engine == "fake" else model_identity(self.model)

    def run(
        self, workload_path: Path, run_dir: Path, batch_size: int, limit: int | None = None
    ) -> PassTiming:
        start = time.perf_counter()
        workload = read_workload(workload_path.resolve())
        cases = select_cases(workload, limit)
        matrix = control_only(batch_size)
        policy = load_policy(None)
        ids = [c.case_id for c in cases]
        fingerprint = self.engine.fingerprint()
        manifest = build_manifest(workload, ids, self.identity, fingerprint, matrix, policy, limit)
        manifest = open_run(run_dir, manifest)
        ctx = RunContext(run_dir, manifest, workload, cases, matrix, policy, self.engine)
        before = self.engine.readings()
        set_up = time.perf_counter()
        passing = Clock()
        with passing.timing():
            execute(ctx)
        after = self.engine.readings()
        open_s, open_cpu, gen_s, gen_cpu, close_s, close_cpu = (
            a - b for a, b in zip(after, before, strict=True)
        )
        return PassTiming(
            setup_s=set_up - start,
            pass_s=passing.wall_s,
            pass_cpu_s=passing.cpu_s,
            open_s=open_s,
            open_cpu_s=open_cpu,
            engine_generate_s=gen_s,
            engine_generate_cpu_s=gen_cpu,
            close_s=close_s,
            close_cpu_s=close_cpu,
            outputs=stored_outputs(run_dir, cases),
        )

    def close(self) -> None:
        self.engine.close()


def stored_outputs(run_dir: Path, cases: Sequence[Case]) -> list[list[int]]:
    rows = read_results(run_dir, ["case_id", "output_token_ids"]).to_pydict()
    by_case = dict(zip(rows["case_id"], rows["output_token_ids"], strict=True))
    return [list(by_case.get(c.case_id) or []) for c in cases]
