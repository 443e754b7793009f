"""Shared fixtures: small workloads frozen with the model-free tokenizer, and the embedded model
(helpers shared across folders live in tests/helpers/).

Tiers: a test that asks for the embedded model (`model_folder`, directly or through another fixture) is
marked `model`; long Monte Carlo and end-to-end tests carry `slow`. `make test` runs everything;
`make test-fast` (`pytest -m "not model and not slow"`) is the developer's quick tier.

Every report the CLI renders during the tests, in this process or a child, is first checked against the
report JSON's schema (KVGATE_CHECK_REPORT=1, kvgate.report.schema); set it to 0 to run without.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvgate.report.schema import CHECK_ENV
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

os.environ.setdefault(CHECK_ENV, "1")


@pytest.fixture(scope="session")
def smoke_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke suite frozen with the word tokenizer (no model needed)."""
    path = tmp_path_factory.mktemp("workloads") / "smoke.words.parquet"
    freeze(["smoke"], path, WordTokenizer(), seed=0)
    return path


@pytest.fixture(scope="session")
def model_folder() -> Path:
    """The embedded model as a safetensors folder (converted once into kvgate's cache)."""
    from kvgate.models import model_folder as folder_of
    from kvgate.models import resolve_model

    return folder_of(resolve_model("smollm2-135m"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `model` every test that needs the embedded model, so `-m "not model"` leaves it out; then run
    the modules holding a `model` or `slow` test first, each module's tests kept together and in order.

    Longest first balances xdist's workers: `make test` hands each worker one whole module at a time
    (`--dist loadfile --no-loadscope-reorder`), so a heavy module left to the end would keep one worker
    busy while the other has nothing more to take."""
    for item in items:
        if "model_folder" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
    heavy = {item.path for item in items if any(item.iter_markers("model")) or any(item.iter_markers("slow"))}
    items.sort(key=lambda item: item.path not in heavy)  # stable: light modules keep their order
