"""Fixtures for workload tests: the real embedded tokenizer, loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.workload.hf_tokenizer import HFPromptTokenizer


@pytest.fixture(scope="session")
def smollm_tokenizer(model_folder: Path) -> HFPromptTokenizer:
    """SmolLM2's tokenizer and chat template, from the embedded model's converted folder."""
    return HFPromptTokenizer.from_folder(model_folder, "smollm2-135m")


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep `datasets`' cache of locally built test data out of the user's cache."""
    config = pytest.importorskip("datasets.config")
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    return cache
