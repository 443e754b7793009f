"""The embedded model's hf engine, shared by the modules that generate with it (one torch thread)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hf_engine_support import one_thread, shared_engine


@pytest.fixture(scope="module")
def engine(model_folder: Path) -> Iterator[Any]:
    with one_thread():
        yield shared_engine()
