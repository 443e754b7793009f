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
    """kvgate's cache (converted models): $KVGATE_CACHE, else `.cache/kvgate` in the repository."""
    return Path(os.environ.get("KVGATE_CACHE", REPO_ROOT / ".cache" / "kvgate"))


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
