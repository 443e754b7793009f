"""The `-E key=value` names each engine takes, checked before the engine's libraries are imported.

kvgate's own options per engine are the engine table's `options` (a test holds them to the engines'
signatures); an engine marked `takes_vllm_args` also passes on any `vllm.EngineArgs` field, whose names are
read from vLLM's source without importing it (an import takes about a minute).
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

from kvgate.engines.registry import ENGINES
from kvgate.engines.vllm.args import ARM_KEYS
from kvgate.errors import BadInput

OWN_OPTIONS: dict[str, tuple[str, ...]] = {name: info.options for name, info in ENGINES.items()}
"""Each engine's own `-E` names (the engine table's `options`)."""


@cache
def vllm_engine_arg_names() -> frozenset[str] | None:
    """The fields of `vllm.EngineArgs`, from `vllm/engine/arg_utils.py`; None when it cannot be read."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return frozenset(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            )
    return None


def check_engine_options(engine: str, options: dict[str, Any]) -> None:
    """Refuse (exit 2, one line, "did you mean") an option name `engine` does not take."""
    own = OWN_OPTIONS.get(engine)
    if own is None or not options:
        return
    if not own:
        raise BadInput(f"engine {engine!r} takes no -E options, got {', '.join(sorted(options))}")
    takes_vllm_args = ENGINES[engine].takes_vllm_args
    extra = vllm_engine_arg_names() if takes_vllm_args else frozenset()
    if extra is None:
        return  # vLLM's arguments unknown here: the engine checks them when it starts
    known = [*own, *sorted(extra)]
    for name in options:
        if takes_vllm_args and name in ("model", "tokenizer"):
            raise BadInput(f"{engine} engine option {name!r}: choose the model with --model")
        if takes_vllm_args and name in ARM_KEYS:
            raise BadInput(
                f"{engine} engine option {name!r} is set per arm by its treatment, not for the run"
            )
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        also = " or a vllm.EngineArgs field" if extra else ""
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(own)}{also}"
        raise BadInput(f"unknown {engine} engine option {name!r} (-E); {hint}")
