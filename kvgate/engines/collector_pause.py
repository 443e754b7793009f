"""Python's cycle collector paused while an engine is created, and what that leaves alive frozen.

Creating the hf engine imports torch and transformers (thousands of modules, classes and functions) and
loads the model, and every 700 net allocations the collector runs; its older generations walk everything
alive again. On the embedded model that was ~1,150 collections, 0.7–0.9 of the ~6 CPU-s to the first
generation (bench/first_generation.py). While it is paused reference counting still frees whatever is
dropped. Afterwards what is alive (modules, the model, the tokenizer) is frozen (`gc.freeze`): never
walked for cycles again, so the collections during generation walk only what generation allocates.
A frozen object is still freed when its last reference goes, but a reference cycle made during the load
is not collected while frozen, and one can hold the engine (an exception caught in transformers keeps
its frames, and they their callers'): one full collection to find such cycles costs ~0.35 CPU-s, so
instead the run thaws (`thaw`, gc.unfreeze) once it has closed its engine, and the next collection
frees them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off inside the block, back as it was after it; what is alive when the block
    ends without error is frozen."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


def thaw() -> None:
    """Frozen objects back to the collector's oldest generation (gc.unfreeze)."""
    gc.unfreeze()
