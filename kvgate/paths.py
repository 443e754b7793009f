"""Where the shipped specs live: the repository's top-level `suites/`, `treatments/` and `reports/`."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO_ROOT / "suites"
TREATMENTS_DIR = REPO_ROOT / "treatments"
REPORTS_DIR = REPO_ROOT / "reports"


def cache_dir() -> Path:
    """kvgate's cache (converted models): $KVGATE_CACHE, else `.cache/kvgate` in the repository."""
    return Path(os.environ.get("KVGATE_CACHE", REPO_ROOT / ".cache" / "kvgate"))
