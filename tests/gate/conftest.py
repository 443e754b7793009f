"""The gate's tests share frozen workloads (tests/helpers/gate_workloads.py), frozen once per session."""

from __future__ import annotations

import pytest
from helpers.gate_workloads import Workloads


@pytest.fixture(scope="session")
def workloads(tmp_path_factory: pytest.TempPathFactory) -> Workloads:
    return Workloads(tmp_path_factory.mktemp("sim"))
