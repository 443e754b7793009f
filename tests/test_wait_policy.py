"""Importing kvgate sets OpenMP's passive wait policy before torch loads its runtime, on every path that
loads torch (the hf engine, the embedded model's conversion), unless the environment names a policy.

The policy is read back from libgomp itself: with OMP_DISPLAY_ENV=VERBOSE it prints its settings when it
starts, and a passive policy is a spin count of 0 (its default spins 300,000 times before sleeping)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _spin_count(first_import: str, **env: str) -> str:
    """libgomp's GOMP_SPINCOUNT in a fresh process that imports `first_import`, then runs a torch op."""
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = f"{first_import}\nimport torch\ntorch.ones(64, 64) @ torch.ones(64, 64)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**base, "OMP_DISPLAY_ENV": "VERBOSE", **env},
    )
    lines = out.stderr.splitlines()
    counts = [line.split("=")[1].strip().strip("'") for line in lines if "GOMP_SPINCOUNT" in line]
    assert counts, out.stderr
    return counts[0]


def test_torch_alone_spins() -> None:
    assert _spin_count("") == "300000"  # the default this guards against, so the check below can fail


@pytest.mark.parametrize("first", ["import kvgate", "import kvgate.converted_model"])
def test_every_kvgate_path_waits_passively(first: str) -> None:
    assert _spin_count(first) == "0"


def test_a_policy_the_environment_names_is_kept() -> None:
    assert _spin_count("import kvgate", OMP_WAIT_POLICY="ACTIVE") != "0"
