"""`replaced_folder`: a cached folder is swapped in whole, or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.paths import replaced_folder


def test_a_finished_block_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "model"
    target.mkdir(parents=True)
    (target / "old.txt").write_text("old")
    with replaced_folder(target) as tmp:
        assert tmp.parent == target.parent and tmp != target
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new.txt"]
    assert [p.name for p in target.parent.iterdir()] == ["model"]


def test_a_failed_block_leaves_the_target_and_no_temp_folder(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="conversion failed"), replaced_folder(target) as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("conversion failed")
    assert [p.name for p in target.iterdir()] == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
