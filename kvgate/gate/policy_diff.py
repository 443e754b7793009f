"""Which settings of a gate policy changed: for refusing a changed policy in words, not hashes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from kvgate.gate.policy import Policy, parse_policy

TEXT_ONLY = "its text only (no setting's value)"


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def changed_settings(old: Policy, new: Policy) -> list[str]:
    """`key: old → new` for every setting whose value differs (defaults included), in field order."""
    return [
        f"{f.name}: {_shown(getattr(old, f.name))} → {_shown(getattr(new, f.name))}"
        for f in dataclasses.fields(Policy)
        if f.name != "text" and getattr(old, f.name) != getattr(new, f.name)
    ]


def policy_changes(old_text: str, new_text: str) -> str:
    """What changed from the policy `old_text` to `new_text`, in one short phrase."""
    changed = changed_settings(
        parse_policy(old_text, "the stored policy"), parse_policy(new_text, "the policy")
    )
    return ", ".join(changed) or TEXT_ONLY
