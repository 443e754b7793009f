"""An internal error (a bug in kvgate): the traceback goes to a file, and one line on stderr names it."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

from kvgate import __version__
from kvgate.errors import EXIT_INTERNAL


def crash_message(exc: BaseException) -> str:
    """Save `exc`'s traceback in a new file in the temp folder; return what to print. Should the file
    not be writable, the traceback itself comes first."""
    trace = "".join(traceback.format_exception(exc))
    summary = f"{type(exc).__name__}: {exc}".replace("\r", "\\r").replace("\n", "\\n")[:300]
    line = f"kvgate: internal error (a bug in kvgate, exit {EXIT_INTERNAL}): {summary}"
    try:
        fd, name = tempfile.mkstemp(prefix="kvgate-crash-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"kvgate {__version__}\nargv: {sys.argv!r}\n\n{trace}")
    except OSError as err:
        return f"{trace}{line}; the traceback above could not be saved ({err.strerror or err})"
    return f"{line}; traceback saved in {name}"
