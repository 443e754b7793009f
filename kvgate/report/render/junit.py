"""JUnit XML: one test suite per arm, its verdict first as a test case of its own, then one per slice.

fail → <failure>, error → <error>, pass → a test case with its figures in <system-out>. An inconclusive
arm or gated slice is a <failure> by default (it does not clear the gate), or <skipped> with
`junit_inconclusive="skip"` (for a job where inconclusive does not fail). A signal slice fails a test only
when it fails the arm; otherwise it is <skipped type="signal"> (it gates nothing, so it is no passed
test). Every `message` attribute is one short line (verdict and counts, at most MESSAGE_LIMIT
characters), as CI summaries show it; the reason, what a verdict needs and the examples are the
element's body.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from kvgate.report.document.arm import Arm
from kvgate.report.document.compare import Compare
from kvgate.report.document.report import Report
from kvgate.report.document.slice import Slice
from kvgate.report.render import text
from kvgate.report.render.text import pct

ARM_CASE = "(arm decision)"
INCONCLUSIVE = ("failure", "skip")
"""What an inconclusive arm or gated slice becomes: a <failure> (default) or a <skipped> test."""
MESSAGE_LIMIT = 160
SIGNAL = "signal slice: not gated (it fails the arm only on a clear regression)"


def _one_line(message: str) -> str:
    line = message.splitlines()[0] if message else ""
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _counts(s: Slice) -> str:
    return (
        f"CFR {s.cache_induced_failures}/{s.control_passes} = {pct(s.cfr)}, "
        f"upper {pct(s.cfr_upper)}, τ {pct(s.tau)}"
    )


def _summary(s: Slice) -> str:
    return f"{s.role} · {s.decision}: {_counts(s)}"


def _details(s: Slice) -> str:
    adjusted = s.adjusted_p if s.role == "gate" else s.q_value
    label = "adjusted p" if s.role == "gate" else "BH q"
    flag = ", stands out" if s.flagged else ""
    return (
        f"{s.role}{flag} · {s.decision}: {s.reason}\n"
        f"{label} {'—' if adjusted is None else f'{adjusted:.3g}'}; {_counts(s)}"
    )


def _element(decision: str, gated: bool, inconclusive: str) -> str | None:
    """The JUnit element a decision becomes (None: the test passes)."""
    if decision == "fail":
        return "failure"
    if not gated:
        return "skipped"
    if decision == "error":
        return "error"
    if decision == "inconclusive":
        return "skipped" if inconclusive == "skip" else "failure"
    return None


def _case(
    suite: ET.Element, classname: str, name: str, element: str | None, outcome: tuple[str, str, str]
) -> str:
    """One test case; `outcome`: its one-line message, the details for its body, and its type."""
    message, body, kind = outcome
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name, "time": "0"})
    if element is not None:
        ET.SubElement(case, element, {"message": _one_line(message), "type": kind}).text = body
    else:
        ET.SubElement(case, "system-out").text = body
    return element or "pass"


def _arm_message(arm: Arm) -> str:
    lines = [text.verdict_line(arm)]
    lines += ["needs: " + line for line in text.holding_back(arm)]
    lines += text.gains_lines(arm)
    if arm.failures:
        shown = arm.failures[: text.EXAMPLES]
        lines.append(text.examples_heading(arm, len(shown)) + ":")
        lines += ["  " + text.example_line(f) for f in shown]
    return "\n".join(lines)


def render_junit(report: Report, junit_inconclusive: str = "failure", **_options: Any) -> str:
    root = ET.Element("testsuites", {"name": f"kvgate {report.run.run_id}"})
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    counted = {"failure": "failures", "error": "errors", "skipped": "skipped"}
    if report.compare is not None:  # regressions against the baseline come first
        _regressions(root, report.compare, totals)
    for arm in report.arms:
        suite = ET.SubElement(root, "testsuite", {"name": arm.arm})
        props = ET.SubElement(suite, "properties")
        properties = {
            "run_id": report.run.run_id,
            "kind": arm.kind,
            "decision": arm.decision,
            "exit_code": str(arm.exit_code),
            "policy_sha256": report.policy.sha256,
        }
        for key, prop in properties.items():
            ET.SubElement(props, "property", {"name": key, "value": prop})
        classname = f"kvgate.{arm.arm}"
        element = _element(arm.decision, True, junit_inconclusive)
        name, decision, _ = text.verdict_parts(arm)
        headline = f"{name}: {decision} · {text.cfr_summary(text.headline_slice(arm))}"
        outcome: tuple[str, str, str] = (headline, _arm_message(arm), arm.decision)
        outcomes = [_case(suite, classname, ARM_CASE, element, outcome)]
        for s in arm.slices:
            element = _element(s.decision, s.gated, junit_inconclusive)
            signal = not s.gated and element == "skipped"
            outcome = (SIGNAL if signal else _summary(s), _details(s), "signal" if signal else s.decision)
            outcomes.append(_case(suite, classname, s.slice, element, outcome))
        counts = {"tests": len(outcomes)} | {key: outcomes.count(element) for element, key in counted.items()}
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _regressions(root: ET.Element, compare: Compare, totals: dict[str, int]) -> None:
    """A suite of the comparison with the baseline: one failing case per regressed slice, else one
    passing case."""
    from kvgate.report.render.compare_text import regression_lines

    suite = ET.SubElement(root, "testsuite", {"name": f"regressions vs {compare.baseline.run_id}"})
    lines = regression_lines(compare)
    classname = "kvgate.regressions"
    for r, line in zip(compare.regressions, lines, strict=True):
        case = ET.SubElement(
            suite, "testcase", {"classname": classname, "name": f"{r.arm} / {r.slice}", "time": "0"}
        )
        ET.SubElement(case, "failure", {"message": _one_line(line), "type": "regression"}).text = line
    if not lines:
        ET.SubElement(suite, "testcase", {"classname": classname, "name": "no regressions", "time": "0"})
    counts = {"tests": max(len(lines), 1), "failures": len(lines), "errors": 0, "skipped": 0}
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value
