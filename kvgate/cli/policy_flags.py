"""`kvgate run --tau T --critical SLICE`: the declared policy, written out before the run.

The flags override those keys of the policy given with `--policy` (or the shipped default) and the
result is the run's declared policy: its full text is stored in the manifest, as a policy file's would
be, so `kvgate report` gates on exactly it. The text is the base policy's settings written back as TOML
(comments are not kept) under a line saying where it came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    raise BadInput(
        f"{where} holds {value!r}, which --tau/--critical cannot carry over: edit the file instead"
    )


def policy_text(base: dict[str, Any], where: str) -> str:
    """`base` (a parsed policy) as TOML: its settings, then its tables."""
    lines = [f"{key} = {_value(v, where)}" for key, v in base.items() if not isinstance(v, dict)]
    for key, table in ((k, v) for k, v in base.items() if isinstance(v, dict)):
        lines += ["", f"[{key}]", *(f"{json.dumps(k)} = {_value(v, where)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def declared_policy(
    policy: Path | None, tau: float | None, critical: tuple[str, ...], folder: Path
) -> Path | None:
    """The policy file a run declares: `policy` as given when no flag is, else a file in `folder` with
    the flags over `policy` (or the shipped default)."""
    if tau is None and not critical:
        return policy
    from kvgate import shipped
    from kvgate.gate.policy import parse_policy, read_policy_text
    from kvgate.tomlspec import parse_toml

    source = policy or shipped.default_policy()
    text = read_policy_text(source)
    parse_policy(text, str(source))  # the base must be a valid policy before it is changed
    settings = parse_toml(text, str(source))
    if tau is not None:
        settings["tau"] = tau
    if critical:
        settings["critical"] = list(dict.fromkeys(critical))
    flags = " ".join(
        [*([f"--tau {tau:g}"] if tau is not None else []), *(f"--critical {c}" for c in critical)]
    )
    out = folder / "declared-policy.toml"
    out.write_text(f"# {source.name} with {flags}\n" + policy_text(settings, str(source)), encoding="utf-8")
    parse_policy(out.read_text(encoding="utf-8"), f"--policy {source} with {flags}")
    return out
