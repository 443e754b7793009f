"""Where kvgate caches converted models: never inside an installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate import paths


def test_the_environment_variable_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path / "mine"))
    assert paths.cache_dir() == tmp_path / "mine"


def test_a_checkout_caches_in_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVGATE_CACHE", raising=False)
    assert paths.cache_dir() == paths.REPO_ROOT / ".cache" / "kvgate"


def test_an_installed_package_caches_in_the_users_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    (site / "kvgate").mkdir(parents=True)  # an installed kvgate: no pyproject.toml beside it
    monkeypatch.setattr(paths, "REPO_ROOT", site)
    monkeypatch.delenv("KVGATE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "kvgate"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "kvgate"
