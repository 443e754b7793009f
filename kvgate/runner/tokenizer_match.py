"""Before a run: the workload's token ids must be the model's.

A workload holds each prompt as token ids of the tokenizer it was frozen with (its metadata's
`tokenizer`: "words", kvgate's word tokenizer when `kvgate freeze` had no `--model`, or the model's
name). A real engine fed another tokenizer's ids reads garbage, or fails on an id past its vocabulary
(an IndexError deep in the model), so a mismatch is refused up front with the command that re-freezes
the workload for the model. The fake engine reads any ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.models import ModelSpec
from kvgate.workload.tokenizer import WordTokenizer

TAKES_ANY_IDS = ("fake",)


def _same_model(tokenizer: str, model: ModelSpec) -> bool:
    """Whether `tokenizer` (a workload's metadata) names `model`: the same name, or the same folder."""
    if tokenizer == model.name:
        return True
    if model.folder is None:
        return False
    try:
        return Path(tokenizer).resolve() == model.folder.resolve()
    except (OSError, ValueError):
        return False


def check_tokenizer(workload_path: Path, meta: dict[str, Any], engine: str, model: ModelSpec) -> None:
    """BadInput when `engine` would read `model`'s tokens from a workload frozen for another tokenizer."""
    tokenizer = meta.get("tokenizer")
    if engine in TAKES_ANY_IDS or not isinstance(tokenizer, str) or _same_model(tokenizer, model):
        return
    frozen = (
        "with the word tokenizer (kvgate freeze without --model)"
        if tokenizer == WordTokenizer.name
        else f"for the tokenizer of {tokenizer!r}"
    )
    suites = ", ".join(sorted(meta.get("suites") or {}))
    raise BadInput(
        f"workload {workload_path} was frozen {frozen}, not for model {model.name!r} of engine {engine!r}: "
        f"freeze its suite{f' ({suites})' if suites else ''} again with "
        f"`kvgate freeze SUITE --model {model.name} -o WORKLOAD.parquet` and pass that to -w"
    )
