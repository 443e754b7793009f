"""Shared fixtures: small workloads frozen with the model-free tokenizer, and the embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer


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
