"""The gate policy (TOML, declared before the run; docs/gate.md has the procedure it configures).

    tau = 0.05                 # the largest acceptable cache-induced failure rate
    confidence = 0.95          # one-sided; 1 − confidence = α, the arm's error rate each way
    rule = "upper_bound"       # or "point" (unsafe: no error control)
    min_control_passes = 20    # fewer control passes in a gated slice withhold a PASS, never a FAIL
    critical = ["task=passkey"]  # gated beside `all`
    signal_alpha = 0.2         # share of α for clear regressions in signal (non-gated) slices
    aa_margin = 0.0            # a FAIL needs CFR − A/A CFR above this, and the difference significant
    aa_alpha = 0.3             # … at this level (the A/A check's; false fails at CFR ≤ τ stay ≤ α)
    cluster = "prefix_group"   # cases that share it are one cluster (or "none", or a slice column)
    defects = "estimate"       # within a cluster: "per_case", "per_cluster" (worst case) or "estimate"
    strata = ["ctx_bucket"]    # every value of these columns is gated: a PASS needs each to pass
    allow_unwinnable = false   # let a critical slice too small to ever pass through the pre-run check
    expected_control_pass_rate = 0.6  # the pre-run check counts cases × this (default: every case)
    sequential = false         # look every `look_every` cases and stop an arm once its verdict is final:
                               # true (or "looks") spends α over the looks; "anytime" decides on
                               # e-processes, valid however often it looks
    look_every = 100           # cases per look (gate.sequential)
    spending_power = 2.0       # α spent by look j: α·(t_j^ρ − t_{j−1}^ρ), t = share of cases seen
    [slice_tau]
    "ctx_bucket=4k" = 0.10     # gated, with its own τ

A slice is named `column=value`, nested as `task=passkey/ctx_bucket=4k`; `all` is every case and
`critical` the cases the workload marks critical. The gated family is `all`, `critical` (when the
workload marks cases) and every slice the policy names; every other slice is a signal. `holm` is read
from policies written for earlier versions and has no effect: the family is always corrected.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate import shipped
from kvgate.bounded_file import read_text
from kvgate.errors import BadInput
from kvgate.spec_kinds import TOP_KEYS, refuse_other_kind
from kvgate.tomlspec import MAX_TOML_BYTES, check_keys, parse_toml

RULES = ("upper_bound", "point")
DEFECTS = ("estimate", "per_case", "per_cluster")
"""How failures inside a cluster may depend on each other (stats.cluster_null): the ICC bounded from the
run, 0, or 1 (a defect fails the whole cluster: the worst case)."""
DEFAULT_STRATA = ("ctx_bucket",)
SPECIAL_SLICES = ("all", "critical")
SAFE_CONFIDENCE = 0.8
"""Below this confidence (or with rule "point") a policy is unsafe: `run` needs --policy-unsafe-reason."""
NO_CLUSTER = "none"
MAX_LOOK_EVERY = 10_000_000
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TERM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[^/=]+$")


def slice_terms(name: str) -> list[tuple[str, str]]:
    """`task=passkey/ctx_bucket=4k` → [("task", "passkey"), ("ctx_bucket", "4k")]; BadInput if malformed."""
    if name in SPECIAL_SLICES:
        return []
    terms = name.split("/")
    if not all(_TERM.match(t) for t in terms):
        raise BadInput(f"slice {name!r} must be 'all', 'critical' or column=value[/column=value]")
    pairs = [tuple(t.split("=", 1)) for t in terms]
    columns = [c for c, _ in pairs]
    if len(set(columns)) != len(columns):
        raise BadInput(f"slice {name!r} names a column twice")
    return [(c, v) for c, v in pairs]


def _is_rate(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0


@dataclass(frozen=True)
class Policy:
    tau: float = 0.05
    confidence: float = 0.95
    rule: str = "upper_bound"
    min_control_passes: int = 20
    holm: bool = False
    critical: tuple[str, ...] = ()
    slice_tau: dict[str, float] = field(default_factory=dict)
    signal_alpha: float = 0.05
    aa_margin: float = 0.0
    aa_alpha: float = 0.3
    """Level of the paired check that the candidate is worse than its A/A replicate: it bounds how often an
    arm no worse than its replicate is failed rather than left inconclusive (docs/gate.md)."""
    cluster: str = "prefix_group"
    allow_unwinnable: bool = False
    sequential: bool = False
    anytime: bool = False
    """With `sequential`: decide each look on anytime-valid e-values (stats.eprocess), not spent α."""
    look_every: int = 100
    spending_power: float = 2.0
    expected_control_pass_rate: float | None = None
    defects: str = "estimate"
    strata: tuple[str, ...] = DEFAULT_STRATA
    text: str = ""

    def __post_init__(self) -> None:
        for name, tau in [("tau", self.tau), *((f"slice_tau {k!r}", v) for k, v in self.slice_tau.items())]:
            if not _is_rate(tau):
                raise BadInput(f"policy {name} must be in [0, 1], got {tau!r}")
        conf = self.confidence
        if not isinstance(conf, int | float) or isinstance(conf, bool) or not 0.5 <= conf < 1.0:
            raise BadInput(f"policy confidence must be in [0.5, 1), got {conf!r}")
        if self.rule not in RULES:
            raise BadInput(f"policy rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        mcp = self.min_control_passes
        if not isinstance(mcp, int) or isinstance(mcp, bool) or mcp < 1:
            raise BadInput(f"policy min_control_passes must be an integer ≥ 1, got {mcp!r}")
        for name in ("holm", "allow_unwinnable", "sequential", "anytime"):
            flag = getattr(self, name)
            if not isinstance(flag, bool):
                raise BadInput(f"policy {name} must be true or false, got {flag!r}")
        for name, share in (("signal_alpha", self.signal_alpha), ("aa_margin", self.aa_margin)):
            if not _is_rate(share) or share == 1.0:
                raise BadInput(f"policy {name} must be in [0, 1), got {share!r}")
        if not _is_rate(self.aa_alpha) or not 0.0 < self.aa_alpha < 1.0:
            raise BadInput(f"policy aa_alpha must be in (0, 1), got {self.aa_alpha!r}")
        every = self.look_every
        if not isinstance(every, int) or isinstance(every, bool) or not 1 <= every <= MAX_LOOK_EVERY:
            raise BadInput(f"policy look_every must be an integer in [1, {MAX_LOOK_EVERY}], got {every!r}")
        rho = self.spending_power
        if not isinstance(rho, int | float) or isinstance(rho, bool) or not 0.5 <= rho <= 10:
            raise BadInput(f"policy spending_power must be in [0.5, 10], got {rho!r}")
        rate = self.expected_control_pass_rate
        if rate is not None and (not _is_rate(rate) or rate == 0):
            raise BadInput(f"policy expected_control_pass_rate must be in (0, 1], got {rate!r}")
        if not isinstance(self.cluster, str) or not _COLUMN.match(self.cluster):
            raise BadInput(f"policy cluster must be 'prefix_group', 'none' or a column, got {self.cluster!r}")
        if self.anytime and not self.sequential:
            raise BadInput("policy anytime needs sequential = true")
        if self.defects not in DEFECTS:
            raise BadInput(f"policy defects must be one of {', '.join(DEFECTS)}, got {self.defects!r}")
        for column in self.strata:
            if not isinstance(column, str) or not _COLUMN.match(column):
                raise BadInput(f"policy strata must be slice column names, got {column!r}")
        for name in (*self.critical, *self.slice_tau):
            if not isinstance(name, str):
                raise BadInput(f"policy slice names must be strings, got {name!r}")
            slice_terms(name)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def is_stratum(self, slice_name: str) -> bool:
        """Whether the slice is one value of a strata column (`ctx_bucket=4k`): gated."""
        terms = slice_terms(slice_name) if "=" in slice_name else []
        return len(terms) == 1 and terms[0][0] in self.strata

    @property
    def alpha(self) -> float:
        """1 − confidence: the error rate each one-sided bound allows."""
        return 1.0 - self.confidence

    @property
    def named_slices(self) -> tuple[str, ...]:
        """Slices the policy names (critical ones, then those with their own τ), without repeats."""
        return tuple(dict.fromkeys((*self.critical, *self.slice_tau)))

    def tau_for(self, slice_name: str) -> float:
        return float(self.slice_tau.get(slice_name, self.tau))

    @property
    def unsafe(self) -> list[str]:
        """Why this policy is below the safety floor (empty when it is not)."""
        reasons = []
        if self.confidence < SAFE_CONFIDENCE:
            reasons.append(f"confidence {self.confidence:g} < {SAFE_CONFIDENCE:g}")
        if self.rule == "point":
            reasons.append('rule "point" compares the estimate to τ with no error control')
        return reasons


def parse_policy(text: str, where: str) -> Policy:
    data = parse_toml(text, where)
    refuse_other_kind(data, "policy", where)
    check_keys(data, set(TOP_KEYS["policy"]), where)
    critical = data.get("critical", [])
    sequential = data.get("sequential", False)
    if sequential == "looks":
        sequential = True
    if sequential not in (True, False, "anytime"):
        raise BadInput(f'{where}: sequential must be true, false, "looks" or "anytime", got {sequential!r}')
    strata = data.get("strata", list(DEFAULT_STRATA))
    if not isinstance(strata, list):
        raise BadInput(f"{where}: strata must be a list of slice column names")
    slice_tau = data.get("slice_tau", {})
    if not isinstance(critical, list):
        raise BadInput(f"{where}: critical must be a list of slice names")
    if not isinstance(slice_tau, dict):
        raise BadInput(f"{where}: slice_tau must be a table of slice name = τ")
    try:
        return Policy(
            tau=data.get("tau", 0.05),
            confidence=data.get("confidence", 0.95),
            rule=data.get("rule", "upper_bound"),
            min_control_passes=data.get("min_control_passes", 20),
            holm=data.get("holm", False),
            critical=tuple(critical),
            slice_tau=dict(slice_tau),
            signal_alpha=data.get("signal_alpha", 0.05),
            aa_margin=data.get("aa_margin", 0.0),
            aa_alpha=data.get("aa_alpha", 0.3),
            cluster=data.get("cluster", "prefix_group"),
            allow_unwinnable=data.get("allow_unwinnable", False),
            sequential=sequential is not False,
            anytime=sequential == "anytime",
            look_every=data.get("look_every", 100),
            spending_power=data.get("spending_power", 2.0),
            expected_control_pass_rate=data.get("expected_control_pass_rate"),
            defects=data.get("defects", "estimate"),
            strata=tuple(strata),
            text=text,
        )
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


def load_policy(path: Path | None) -> Policy:
    path = path or shipped.default_policy()
    return parse_policy(read_policy_text(path), str(path))


def read_policy_text(path: Path) -> str:
    """A policy file's text, read as every TOML spec is (`bounded_file.read_text`)."""
    try:
        return read_text(path, MAX_TOML_BYTES, "policy")
    except FileNotFoundError:
        raise BadInput(f"policy {path} does not exist; check the path") from None
