"""Load transformers' model machinery without scipy, which the hf engine never calls.

`transformers.modeling_utils` imports its loss functions, and the object-detection ones
(`transformers/loss/loss_for_object_detection.py:26`, and five more beside it) import
`scipy.optimize.linear_sum_assignment` when `is_scipy_available()` says scipy is installed: scipy.optimize
brings scipy.sparse, linalg, spatial and fft, ≈0.3 CPU-s per process, for a Hungarian matching no causal
language model runs. scipy is optional to transformers, and every use is guarded: with it absent the
losses load without the matcher, and building one raises transformers' own "requires the scipy library"
error. Marking scipy absent (`sys.modules["scipy"] = None`) while that module is imported makes
transformers take that path, as on a machine without scipy; the marker is removed afterwards, so kvgate's
own statistics (`kvgate.stats`: scipy.special, for the report a run ends with) import scipy as usual.
transformers caches its answer (`is_scipy_available` is an lru_cache), so it keeps that path for the
rest of the process.
"""

from __future__ import annotations

import importlib
import sys

MODEL_MACHINERY = "transformers.modeling_utils"


def import_model_machinery_without_scipy() -> bool:
    """Import MODEL_MACHINERY with scipy marked absent; True when that kept scipy out. Nothing is hidden
    where scipy or the machinery is already imported, or transformers has already found scipy."""
    if "scipy" in sys.modules or MODEL_MACHINERY in sys.modules or _transformers_found_scipy():
        importlib.import_module(MODEL_MACHINERY)
        return False
    sys.modules["scipy"] = None  # type: ignore[assignment]
    try:
        importlib.import_module(MODEL_MACHINERY)
    finally:
        if "scipy" in sys.modules and sys.modules["scipy"] is None:
            del sys.modules["scipy"]
    return True


def _transformers_found_scipy() -> bool:
    """Whether transformers already answered `is_scipy_available()` (then its guarded imports would try
    scipy, and fail on the marker)."""
    checks = sys.modules.get("transformers.utils.import_utils")
    cached = getattr(getattr(checks, "is_scipy_available", None), "cache_info", None)
    return bool(cached is not None and cached().currsize)
