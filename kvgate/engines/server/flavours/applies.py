"""What a server flavour applies, as one table per flavour (`Applies`): its refusals read it, its launch
flags read it, and `kvgate engines` lists it, so the listing cannot say what the checks refuse.

A treatment dtype the stack stores is mapped to the value its own flag or config field takes
(`kv_dtypes`); any other is refused in one line naming the stack, where the dtype goes and every value
that place takes (`kv_choices`, from the stack's own code). `proof` names, per treatment kind, the
stack's own counter that shows the treatment ran (the proof of treatment reads nothing else); a kind
with no such counter says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvgate.treatments.spec import Quantize, Treatment


@dataclass(frozen=True)
class Applies:
    stack: str
    """The stack's own name, as its refusals say it ("SGLang")."""
    kinds: tuple[str, ...]
    """Treatment kinds the flavour applies (besides "full" and "composite")."""
    kv_flag: str
    """Where a quantise arm's dtype goes: the stack's flag or config field."""
    kv_choices: tuple[str, ...]
    """Every value that flag or field takes (the stack's code)."""
    kv_dtypes: Mapping[str, str]
    """Treatment dtype → the value `kv_flag` is given for it."""
    fp8_scales: tuple[str, ...]
    """The FP8 scale granularities the stack stores (a per-layer k_scale/v_scale: "tensor")."""
    reuse_modes: tuple[str, ...]
    offload_tiers: tuple[str, ...]
    """The tiers an offload arm may name (empty: offload is refused)."""
    proof: Mapping[str, str]
    """Treatment kind → the counter the stack answers that proves it ran ("" where none does)."""
    pool: str = ""
    """Where a matrix's `kv_blocks` goes (the KV pool's size), or "" where the stack's is not mapped."""

    def dtype_refusal(self, part: Quantize) -> str | None:
        """Why the stack cannot store `part`'s dtype (and scale), in one line; None when it can."""
        if part.dtype not in self.kv_dtypes:
            choices = ", ".join(self.kv_choices)
            return f"{self.stack}'s {self.kv_flag} takes {choices}; {part.dtype} is not one of them"
        if part.dtype.startswith("fp8") and part.scale not in self.fp8_scales:
            return f"{self.stack} scales FP8 KV per layer (one k_scale, one v_scale), not per {part.scale}"
        if part.dtype_v is not None and part.dtype_v not in self.kv_dtypes:
            choices = ", ".join(self.kv_choices)
            return f"{self.stack}'s {self.kv_flag} takes {choices}; V's {part.dtype_v} is not one of them"
        return None

    def listing(self) -> dict[str, str]:
        """The flavour's row of `kvgate engines`: what it applies, each kind's proof counter."""
        mapped = ", ".join(d if d == v else f"{d} ({v})" for d, v in self.kv_dtypes.items())
        proofs = "; ".join(f"{kind}: {self.proof.get(kind) or 'none (unproven)'}" for kind in self.kinds)
        return {
            "treatment kinds": ", ".join(("full", *self.kinds, "composite")),
            "kv dtypes": f"{mapped} via {self.kv_flag}" if mapped else "none",
            "reuse": ", ".join(self.reuse_modes) or "none",
            "offload": ", ".join(self.offload_tiers) or "refused",
            "kv_blocks": self.pool or "refused",
            "proof counters": proofs,
        }


def kind_refusal(applies: Applies, treatment: Treatment, reasons: Mapping[str, str]) -> str | None:
    """The first part of `treatment` of a kind the stack does not apply, refused in `reasons`' words."""
    for part in treatment.parts():
        if part.kind not in ("full", *applies.kinds):
            return reasons[part.kind]
    return None
