"""The cycle collector is paused while an engine loads and what the load leaves alive is frozen; the hf
engine and its model hold no reference cycle, so dropping them frees them though frozen."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvgate.engines.collector_pause import collector_paused, thaw


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations the collector walked while the test ran; frozen objects thawed after it."""
    walked: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            walked.append(info["generation"])

    gc.callbacks.append(note)
    yield walked
    gc.callbacks.remove(note)
    thaw()


def test_no_collection_inside_and_the_survivors_frozen(collections: list[int]) -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        kept = [[i] for i in range(50_000)]  # far past the collector's threshold of 700
    assert gc.isenabled() and collections == []
    assert gc.get_freeze_count() >= frozen + len(kept)


def test_a_failed_block_freezes_nothing_and_restores_the_collector() -> None:
    frozen = gc.get_freeze_count()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("load failed")
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        thaw()


def test_the_hf_engine_is_created_without_a_collection_and_freed_once_thawed(
    model_folder: Path, collections: list[int]
) -> None:
    from kvgate.engines.registry import create_engine
    from kvgate.models import resolve_model

    model_spec = resolve_model("smollm2-135m")
    collections.clear()  # those of importing the registry
    engine = create_engine("hf", model_spec, threads=1)
    assert collections == []  # importing the module (torch, transformers) and loading the model: none
    assert gc.get_freeze_count() > 100_000
    model = weakref.ref(engine.model)
    engine.close()
    thaw()
    del engine
    gc.collect()
    assert model() is None and gc.get_freeze_count() == 0


def test_a_run_thaws_what_creating_its_engine_froze(tmp_path: Path, smoke_workload: Path) -> None:
    from click.testing import CliRunner

    from kvgate.cli import cli

    thaw()
    argv = ["run", "-w", str(smoke_workload), "--engine", "fake", "--limit", "1", "-o", str(tmp_path)]
    result = CliRunner().invoke(cli, [*argv, "--quiet"])
    assert result.exit_code in (0, 1, 3), result.output
    assert gc.get_freeze_count() == 0
