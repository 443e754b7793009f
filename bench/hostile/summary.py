"""The battery's summary: per class, the exits and each broken promise counted; the deviating cases listed;
and the Markdown table bench/results/hostile_battery.md shows."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from hostile.case import MEMORY_KIB, SERVED, Outcome


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    per_class: dict[str, Counter[str]] = defaultdict(Counter)
    deviating: list[dict[str, Any]] = []
    for o in outcomes:
        c = per_class[o.case.cls]
        c["cases"] += 1
        c[f"exit {o.code}"] += 1
        found = o.deviations()
        for kind in ("traceback", "memory", "outside write", "secret", "unexpected exit"):  # exits: above
            c[kind] += kind in found
        c["peak over 1 GiB, refused"] += o.peak_kib > MEMORY_KIB and o.code in SERVED
        c["max peak MiB"] = max(c["max peak MiB"], o.peak_kib // 1024)
        if found:
            last = [line for line in o.output.strip().splitlines() if line.strip()][-1:] or [""]
            deviating.append(
                {
                    "class": o.case.cls,
                    "case": o.case.name,
                    "code": o.code,
                    "found": found,
                    "wall_s": round(o.wall_s, 1),
                    "peak_mib": o.peak_kib // 1024,
                    "outside": o.outside[:3],
                    "secret": o.secret[:3],
                    "last": last[0][:240],
                }
            )
    return {"classes": {k: dict(v) for k, v in sorted(per_class.items())}, "deviating": deviating}


def render(summary: dict[str, Any], label: str) -> str:
    cols = [
        "cases",
        "exit 0",
        "exit 1",
        "exit 2",
        "exit 3",
        "exit 4",
        "exit 70",
        "exit hang",
        "traceback",
        "memory",
        "max peak MiB",
        "outside write",
        "secret",
        "unexpected exit",
    ]
    lines = [
        f"| {label} | " + " | ".join(c.replace("exit hang", "hang") for c in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    total: Counter[str] = Counter()
    for cls, counts in summary["classes"].items():
        lines.append(f"| {cls} | " + " | ".join(str(counts.get(c, 0)) for c in cols) + " |")
        for c in cols:
            total[c] = max(total[c], counts.get(c, 0)) if c == "max peak MiB" else total[c] + counts.get(c, 0)
    lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    return "\n".join(lines)
