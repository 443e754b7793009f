"""The gate policy (TOML, declared before the run; DESIGN.md, "Gate policy").

    tau = 0.05                 # the largest acceptable cache-induced failure rate
    confidence = 0.95          # for the one-sided bound
    rule = "upper_bound"       # or "point"
    min_control_passes = 20    # fewer control passes in a slice: inconclusive, never pass
    holm = false               # Holm-correct McNemar p-values across slices
    critical = ["task=passkey"]  # slices where one reproducible candidate-only failure fails the gate
    [slice_tau]
    "ctx_bucket=4k" = 0.10
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from kvgate.errors import BadInput
from kvgate.paths import TREATMENTS_DIR
from kvgate.tomlspec import check_keys, load_toml, parse_toml

DEFAULT_POLICY = TREATMENTS_DIR / "policy.toml"
RULES = ("upper_bound", "point")


@dataclass(frozen=True)
class Policy:
    tau: float = 0.05
    confidence: float = 0.95
    rule: str = "upper_bound"
    min_control_passes: int = 20
    holm: bool = False
    critical: tuple[str, ...] = ()
    slice_tau: dict[str, float] = field(default_factory=dict)
    text: str = ""

    def __post_init__(self) -> None:
        for name, tau in [("tau", self.tau), *((f"slice_tau {k!r}", v) for k, v in self.slice_tau.items())]:
            if not isinstance(tau, int | float) or isinstance(tau, bool) or not 0.0 <= tau <= 1.0:
                raise BadInput(f"policy {name} must be in [0, 1], got {tau!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise BadInput(f"policy confidence must be in [0.5, 1), got {self.confidence!r}")
        if self.rule not in RULES:
            raise BadInput(f"policy rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if not isinstance(self.min_control_passes, int) or self.min_control_passes < 1:
            raise BadInput(f"policy min_control_passes must be an integer ≥ 1, got {self.min_control_passes!r}")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def tau_for(self, slice_name: str) -> float:
        return float(self.slice_tau.get(slice_name, self.tau))


def parse_policy(text: str, where: str) -> Policy:
    data = parse_toml(text, where)
    allowed = {"tau", "confidence", "rule", "min_control_passes", "holm", "critical", "slice_tau"}
    check_keys(data, allowed, where)
    try:
        return Policy(
            tau=data.get("tau", 0.05),
            confidence=data.get("confidence", 0.95),
            rule=data.get("rule", "upper_bound"),
            min_control_passes=data.get("min_control_passes", 20),
            holm=bool(data.get("holm", False)),
            critical=tuple(data.get("critical", ())),
            slice_tau=dict(data.get("slice_tau", {})),
            text=text,
        )
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


def load_policy(path: Path | None) -> Policy:
    path = path or DEFAULT_POLICY
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read policy {path}: {exc.strerror or exc}") from None
    return parse_policy(text, str(path))
