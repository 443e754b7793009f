"""The repository kvgate runs from (for its git commit), kvgate's cache, and how a cached folder is
written (`replaced_folder`). Shipped specs are found through `kvgate.shipped`."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """kvgate's cache (converted models): $KVGATE_CACHE; else `.cache/kvgate` in the checkout kvgate
    runs from (an editable install); else the user's cache, `$XDG_CACHE_HOME/kvgate` or
    `~/.cache/kvgate` (never inside an installed package)."""
    if "KVGATE_CACHE" in os.environ:
        return Path(os.environ["KVGATE_CACHE"])
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "kvgate").is_dir():
        return REPO_ROOT / ".cache" / "kvgate"
    user_cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(user_cache) / "kvgate"


@contextmanager
def replaced_folder(target: Path) -> Iterator[Path]:
    """A temp folder beside `target` to fill; when the block ends without error it replaces `target`
    (one rename), otherwise it is removed. A reader never sees a half-written `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
