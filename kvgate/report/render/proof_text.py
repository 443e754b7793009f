"""An arm's proof of treatment (`arms[].proof`, analysis.proof) in one line of words, for every format."""

from __future__ import annotations

from kvgate.report.document.arm import Arm
from kvgate.report.document.proof import Proof


def _figures(proof: Proof) -> list[str]:
    """The measured evidence, kind by kind, as the engine counted it."""
    out = []
    if proof.kv_quantized is not None:
        out.append(f"{proof.kv_quantized:,} entries quantised")
    if proof.kv_dtypes:
        out.append(f"KV {', '.join(proof.kv_dtypes)}")
    if proof.kv_bytes_per_entry is not None and proof.control_kv_bytes_per_entry:
        out.append(f"{proof.kv_bytes_per_entry:,.0f} bytes/entry vs {proof.control_kv_bytes_per_entry:,.0f}")
    if proof.eviction_over_bound is not None:
        share = proof.kv_kept_share
        kept = "" if share is None else f"{100 * share:.1f}% of entries kept, "
        out.append(f"{kept}{proof.eviction_over_bound} cases over the ratio's bound")
    written, read = proof.tier_blocks_written, proof.tier_blocks_read
    if written is not None or read is not None:
        out.append(f"tier blocks {'?' if written is None else f'{written:,}'} written, "
                   f"{'?' if read is None else f'{read:,}'} read")  # fmt: skip
    if proof.cache_hit_cases is not None:
        out.append(f"{proof.cache_hit_cases} cache-hit cases")
    if proof.spans_reused is not None:
        out.append(f"{proof.spans_reused} spans reused")
    return out


def proof_line(arm: Arm) -> str | None:
    """ "proof of treatment: shown|MISSING over P passes, N cases — figures[; what is missing]"; None for an
    arm without one (a report of an older shape)."""
    proof = arm.proof
    if proof is None:
        return None
    head = f"proof of treatment: {'shown' if proof.status == 'shown' else 'MISSING'}"
    passes = "1 pass" if proof.passes == 1 else f"{proof.passes} passes"
    head += f" ({passes}, {proof.cases} cases)"
    figures = _figures(proof)
    line = head + (" — " + " · ".join(figures) if figures else "")
    if proof.missing:
        prefix = f"arm {arm.arm!r}: "
        line += "; " + "; ".join(m.removeprefix(prefix) for m in proof.missing)
    return line
