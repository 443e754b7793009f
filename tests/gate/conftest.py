"""The gate's tests share frozen workloads (tests/gate/gate_workloads.py), frozen once per session."""

from __future__ import annotations

import pytest
from gate_workloads import Workloads


@pytest.fixture(scope="session")
def workloads(tmp_path_factory: pytest.TempPathFactory) -> Workloads:
    return Workloads(tmp_path_factory.mktemp("sim"))
