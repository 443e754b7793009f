"""The serving stack's version a run's rows came from, recorded in its manifest, and the rule: one per run.

A server is started (or a given endpoint first asked) only once the manifest is written, so its version
cannot be part of the run id's identity; the first server of the run names it (`stack_version` in the
manifest: stack, version, where it was read), and every later server, another arm's or a resumed run's,
must name the same: rows of two builds of a stack are not paired (numerics differ), so a run served by
another version is refused in one line naming both. A run made before kvgate recorded it has no
`stack_version`; its next server's is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvgate.engines.server.stack_version import described
from kvgate.errors import BadInput

FIELD = "stack_version"


def record_stack_version(manifest: dict[str, Any], arm: str, answered: dict[str, Any], run_dir: Path) -> bool:
    """Record `answered` (what arm `arm`'s server named) as the run's stack version when it has none
    (True: the manifest should be written before any row); refuse one that differs from the recorded."""
    recorded = manifest.get(FIELD)
    if recorded is None:
        manifest[FIELD] = dict(answered)
        return True
    if (recorded.get("stack"), recorded.get("version")) == (answered["stack"], answered["version"]):
        return False
    raise BadInput(
        f"cannot continue run {run_dir}: its rows come from {described(recorded)}, but the server of arm "
        f"{arm!r} is {described(answered)}; rows of two versions are not paired: serve every arm with "
        f"{described(recorded)} to resume, or start a new run"
    )
