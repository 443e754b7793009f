"""The gate's tests share frozen workloads (tests/helpers/gate_workloads.py), frozen once per session:
under xdist, once for all its workers, in the folder they share (the parent of each worker's own)."""

from __future__ import annotations

import os

import pytest
from helpers.gate_workloads import Workloads


@pytest.fixture(scope="session")
def workloads(tmp_path_factory: pytest.TempPathFactory) -> Workloads:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return Workloads(tmp_path_factory.mktemp("sim"))
    shared = tmp_path_factory.getbasetemp().parent / "sim"  # this session's, shared by its workers
    shared.mkdir(exist_ok=True)
    return Workloads(shared)
