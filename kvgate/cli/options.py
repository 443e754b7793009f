"""Option parsing shared by commands: repeatable typed `-E key=value` engine options, the path type of
every path option and argument, and the one wording of what `--model` takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

MODEL_TAKES = (
    "a known model's name (kvgate models), a local Hugging Face model folder, or a hub id org/name[@revision]"
)
"""What --model takes, in one wording for every command and page."""


def parse_engine_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`-E key=value` pairs; values are JSON when they parse as JSON (numbers, booleans), else strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="-E")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
        except RecursionError:
            raise click.BadParameter(f"{key}'s value is nested thousands deep", param_hint="-E") from None
    return options


def was_given(ctx: click.Context, name: str) -> bool:
    """Whether the option `name` was given on the command line (not left at its default)."""
    return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT


class GivenPath(click.Path):
    """A path option or argument as a `Path`; an empty one is refused (it would name the current folder:
    `-o ''` made the run there, `--policy ''` read "policy . is not a regular file")."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("the path is empty; name a file or folder", param, ctx)
        return super().convert(value, param, ctx)


PATH = GivenPath(path_type=Path)
"""The type of every path option and argument of kvgate's commands."""
