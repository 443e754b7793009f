"""The hf engine's package sets OpenMP's passive wait policy before torch loads, unless the environment
names one (the thread count and results are unchanged; spinning threads burned CPU on a shared machine)."""

from __future__ import annotations

import os
import subprocess
import sys

CHECK = (
    "import os, sys; import kvgate.engines.hf; print(os.environ['OMP_WAIT_POLICY'], 'torch' in sys.modules)"
)


def _policy(env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    return out.stdout.strip()


def test_passive_unless_the_environment_names_a_policy() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _policy(env) == "PASSIVE False"  # set before torch is imported
    assert _policy({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE False"
