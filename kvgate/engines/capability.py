"""An arm an engine cannot run, refused from the engine table alone (`registry.ENGINES[..]`: its kinds,
reuse modes and offload tiers).

This runs before the engine is created, so `--engine vllm` with an eviction arm is refused in well under
a second, without importing vLLM, and the message names what can run it instead: the engines whose
table lists every kind of the arm, and the `--arms` of this matrix the chosen engine can run.
"""

from __future__ import annotations

from kvgate.engines.registry import ENGINES, engine_info
from kvgate.errors import TreatmentRefused
from kvgate.treatments.matrix import Matrix
from kvgate.treatments.spec import Offload, Reuse, Treatment

TEST_ENGINE = "fake"
"""Never offered as what to run instead: it measures nothing real."""


def missing_kinds(engine: str, treatment: Treatment) -> list[str]:
    """What of `treatment` (each part of a composite) `engine`'s table does not list: a kind, a reuse mode
    ("span reuse") or an offload tier ("disk offload"; not checked for a part whose engine_args may
    configure its own tier, as vLLM's kv_transfer_config does)."""
    info = engine_info(engine)
    missing = []
    for part in treatment.parts():
        if part.kind not in info.kinds:
            missing.append(part.kind)
        elif isinstance(part, Reuse) and part.mode not in info.reuse_modes:
            missing.append(f"{part.mode} reuse")
        elif isinstance(part, Offload) and not part.engine_args and part.tier not in info.offload_tiers:
            missing.append(f"{part.tier} offload")
    return missing


def check_capable(engine: str, matrix: Matrix) -> None:
    """TreatmentRefused for the first arm of `matrix` of a kind `engine` cannot apply, with what to run."""
    for arm in matrix.arms():
        missing = missing_kinds(engine, arm)
        if not missing:
            continue
        others = [n for n in ENGINES if n not in (engine, TEST_ENGINE) and not missing_kinds(n, arm)]
        runnable = [c.name for c in matrix.candidates if not missing_kinds(engine, c)]
        instead = [f"--engine {' or '.join(others)}"] if others else []
        if arm is not matrix.control and runnable:
            instead.append(f"--arms {','.join(runnable)} to leave it out")
        raise TreatmentRefused(
            f"engine {engine!r} cannot run arm {arm.name!r}: it has no {' or '.join(missing)}; "
            f"run it with {', or '.join(instead) if instead else 'another matrix'}"
        )
