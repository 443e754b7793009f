"""A Ray worker: one engine, loaded once, generating the batches of one work unit at a time.

The driver calls its methods in order (an actor runs them one after another): `start` loads the engine
and says what hardware it runs on; then, per unit, `begin` opens a session for the unit's pass, one
`generate` per batch returns that batch's generations (so rows reach the driver batch by batch), and
`end` closes the session. The worker never writes the run's store: the driver is its only writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvgate.engines.base import ArmSession, ArmSetup, Engine, Generation, NamesItsStack
from kvgate.engines.collector_pause import thaw
from kvgate.engines.registry import create_engine
from kvgate.models import ModelSpec
from kvgate.rundir.hardware import this_machine
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case


class EngineWorker:
    """Holds one engine for the run (made into a Ray actor by the driver)."""

    def __init__(self, engine: str, model: ModelSpec, options: dict[str, Any]) -> None:
        self.spec = (engine, model, options)
        self.engine: Engine | None = None
        self.session: ArmSession | None = None

    def start(self) -> dict[str, Any]:
        """Load the engine; its fingerprint and this machine's hardware kind and node."""
        name, model, options = self.spec
        self.engine = create_engine(name, model, **options)
        fingerprint = self.engine.fingerprint()
        return {"fingerprint": fingerprint, **this_machine(fingerprint)}

    def refusal(self, treatment: Treatment) -> str | None:
        return self._engine().refusal(treatment)

    def begin(self, setup: ArmSetup) -> dict[str, Any] | None:
        """Open the unit's session; the serving stack's version its server names, if it names one."""
        self.end()
        self.session = self._engine().open(setup)
        return self.session.stack_version if isinstance(self.session, NamesItsStack) else None

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        if self.session is None:
            raise RuntimeError("generate before begin: the worker holds no session")
        return self.session.generate(cases)

    def end(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    def close(self) -> None:
        self.end()
        if self.engine is not None:
            self.engine.close()
            self.engine = None
            thaw()  # what creating the engine froze (engines.collector_pause)

    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("the worker's engine is not started")
        return self.engine
