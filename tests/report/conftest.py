"""The fixed run, written once per session (read-only for the tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.report_fixed_run import make_fixed_run


@pytest.fixture(scope="session")
def fixed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fixed_run(tmp_path_factory.mktemp("fixed"))
