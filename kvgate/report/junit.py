"""JUnit XML: one test suite per arm, its verdict first as a test case of its own, then one per slice.

fail → <failure>, error → <error>, pass → an empty test case. An inconclusive arm or gated slice is a
<failure> by default (it does not clear the gate), or <skipped> with `inconclusive="skip"`. A signal
slice fails a test only when it fails the arm; otherwise it passes, its figures in <system-out>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from kvgate.report import text
from kvgate.report.text import pct

ARM_CASE = "(arm decision)"
INCONCLUSIVE = ("failure", "skip")
"""What an inconclusive arm or gated slice becomes: a <failure> (default) or a <skipped> test."""
EXAMPLES = 5


def _message(s: dict[str, Any]) -> str:
    adjusted = s["adjusted_p"] if s["role"] == "gate" else s["q_value"]
    label = "adjusted p" if s["role"] == "gate" else "BH q"
    flag = ", stands out" if s.get("flagged") else ""
    return (
        f"{s['role']}{flag} · {s['decision']}: {s['reason']}; "
        f"{label} {'—' if adjusted is None else f'{adjusted:.3g}'}; "
        f"CFR {s['cache_induced_failures']}/{s['control_passes']} = {pct(s['cfr'])}, "
        f"upper {pct(s['cfr_upper'])}, τ {pct(s['tau'])}"
    )


def _element(decision: str, gated: bool, inconclusive: str) -> str | None:
    """The JUnit element a decision becomes (None: the test passes)."""
    if decision == "fail":
        return "failure"
    if decision == "error":
        return "error" if gated else None
    if decision == "inconclusive" and gated:
        return "skipped" if inconclusive == "skip" else "failure"
    return None


def _case(suite: ET.Element, classname: str, name: str, element: str | None, message: str, kind: str) -> str:
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name, "time": "0"})
    if element is not None:
        ET.SubElement(case, element, {"message": message, "type": kind}).text = message
    else:
        ET.SubElement(case, "system-out").text = message
    return element or "pass"


def _arm_message(arm: dict[str, Any]) -> str:
    lines = [text.verdict_line(arm)]
    lines += ["needs: " + line for line in text.holding_back(arm)]
    lines += text.gains_lines(arm)
    if arm.get("failures"):
        shown = arm["failures"][:EXAMPLES]
        lines.append(text.examples_heading(arm, len(shown)) + ":")
        lines += ["  " + text.example_line(f) for f in shown]
    return "\n".join(lines)


def render_junit(report: dict[str, Any], inconclusive: str = "failure") -> str:
    root = ET.Element("testsuites", {"name": f"kvgate {report['run']['run_id']}"})
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    counted = {"failure": "failures", "error": "errors", "skipped": "skipped"}
    if "compare" in report:  # regressions against the baseline come first
        _regressions(root, report["compare"], totals)
    for arm in report["arms"]:
        suite = ET.SubElement(root, "testsuite", {"name": arm["arm"]})
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("run_id", report["run"]["run_id"]),
            ("kind", arm["kind"]),
            ("decision", arm["decision"]),
            ("exit_code", arm["exit_code"]),
            ("policy_sha256", report["policy"]["sha256"]),
        ):
            ET.SubElement(props, "property", {"name": key, "value": str(value)})
        classname = f"kvgate.{arm['arm']}"
        element = _element(arm["decision"], True, inconclusive)
        outcomes = [_case(suite, classname, ARM_CASE, element, _arm_message(arm), arm["decision"])]
        for s in arm["slices"]:
            element = _element(s["decision"], s["gated"], inconclusive)
            outcomes.append(_case(suite, classname, s["slice"], element, _message(s), s["decision"]))
        counts = {"tests": len(outcomes)} | {key: outcomes.count(element) for element, key in counted.items()}
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _regressions(root: ET.Element, compare: dict[str, Any], totals: dict[str, int]) -> None:
    """A suite of the comparison with the baseline: one failing case per regressed slice, else one
    passing case."""
    from kvgate.report.compare_text import regression_lines

    suite = ET.SubElement(root, "testsuite", {"name": f"regressions vs {compare['baseline']['run_id']}"})
    lines = regression_lines(compare)
    classname = "kvgate.regressions"
    for r, line in zip(compare["regressions"], lines, strict=True):
        case = ET.SubElement(
            suite, "testcase", {"classname": classname, "name": f"{r['arm']} / {r['slice']}", "time": "0"}
        )
        ET.SubElement(case, "failure", {"message": line, "type": "regression"}).text = line
    if not lines:
        ET.SubElement(suite, "testcase", {"classname": classname, "name": "no regressions", "time": "0"})
    counts = {"tests": max(len(lines), 1), "failures": len(lines), "errors": 0, "skipped": 0}
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value
