"""JUnit XML: one test suite per arm, one test case per arm × slice, plus the arm's own decision.

fail → <failure>, inconclusive → <skipped>, error → <error>, pass → an empty test case. CI systems
(GitLab, Jenkins, GitHub test reporters) show the slices that block the rollout.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from kvgate.report.text import pct

ARM_CASE = "(arm decision)"
ELEMENT = {"fail": "failure", "inconclusive": "skipped", "error": "error"}


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


def _case(suite: ET.Element, classname: str, name: str, decision: str, message: str) -> None:
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name, "time": "0"})
    if decision in ELEMENT:
        ET.SubElement(case, ELEMENT[decision], {"message": message, "type": decision}).text = message


def render_junit(report: dict[str, Any]) -> str:
    root = ET.Element("testsuites", {"name": f"kvgate {report['run']['run_id']}"})
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for arm in report["arms"]:
        suite = ET.SubElement(root, "testsuite", {"name": arm["arm"]})
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("run_id", report["run"]["run_id"]),
            ("kind", arm["kind"]),
            ("policy_sha256", report["policy"]["sha256"]),
        ):
            ET.SubElement(props, "property", {"name": key, "value": str(value)})
        classname = f"kvgate.{arm['arm']}"
        decisions = [arm["decision"]]
        _case(suite, classname, ARM_CASE, arm["decision"], f"{arm['decision']}: {arm['reason']}")
        for s in arm["slices"]:
            _case(suite, classname, s["slice"], s["decision"], _message(s))
            decisions.append(s["decision"])
        counts = {
            "tests": len(decisions),
            "failures": decisions.count("fail"),
            "errors": decisions.count("error"),
            "skipped": decisions.count("inconclusive"),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
