"""The GitHub Actions example (examples/ci/github-actions.yml) runs as written: its `run:` steps, in order,
in bash as GitHub runs them (`bash --noprofile --norc -eo pipefail`), from the repository root, with the
settings the workflow declares and only these changed: the fake engine, the output folder, the job
summary file. The install step is checked, not run (kvgate is installed here already)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ENV_EXPRESSION = re.compile(r"^env\.([A-Z_][A-Z0-9_]*)$")
BRANCH = "Pass or fail on the gate's exit code"


def workflow() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return data


def steps() -> list[dict[str, Any]]:
    (job,) = workflow()["jobs"].values()
    found: list[dict[str, Any]] = job["steps"]
    return found


def settings(**changed: str) -> dict[str, str]:
    """The workflow's env with `changed` applied; a setting it does not declare is a mistake."""
    declared = {k: str(v) for k, v in workflow()["env"].items()}
    assert set(changed) <= set(declared), set(changed) - set(declared)
    return declared | changed


def resolved(text: str, env: dict[str, str]) -> str:
    """`text` with its `${{ env.NAME }}` expressions replaced; any other expression is refused (the run
    steps take their settings from the environment only)."""

    def value(match: re.Match[str]) -> str:
        name = ENV_EXPRESSION.match(match.group(1))
        assert name, f"unexpected expression {match.group(0)}"
        return env[name.group(1)]

    return EXPRESSION.sub(value, text)


def run_workflow(
    out: Path, summary: Path, only: str | None = None, **changed: str
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the `run:` steps (or only the one named `only`) as a job would; results by step name. A step
    runs when every step before it succeeded, or when its condition is `always()`."""
    env = settings(KVGATE_ENGINE="fake", KVGATE_OUT=str(out), **changed)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    environ |= env | {
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(REPO),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    failed = False
    for step in steps():
        if "run" not in step or step.get("id") == "install" or (only and step["name"] != only):
            continue
        assert step.get("if") in (None, "always()"), step.get("if")
        if failed and step.get("if") is None:
            continue
        assert not EXPRESSION.search(step["run"]) and "env" not in step, step["name"]
        script = out.parent / "step.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=REPO, env=environ, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        results[step["name"]] = done
        failed = failed or done.returncode != 0
    return results


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The whole workflow once: the smoke suite on the default matrix (inconclusive by design)."""
    out = tmp_path_factory.mktemp("ci") / "kvgate-out"
    summary = out.parent / "summary.md"
    return out, summary, run_workflow(out, summary)


def test_the_install_step_installs_kvgate_from_the_checkout() -> None:
    (install,) = [s for s in steps() if s.get("id") == "install"]
    assert 'pip install ".[hf,report]"' in install["run"] and "kvgate --help" in install["run"]


def test_the_workflow_gates_reports_and_warns_on_an_inconclusive_gate(
    gated: tuple[Path, Path, dict[str, Any]],
) -> None:
    out, summary, results = gated
    for name, done in results.items():
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    assert (out / "exit-code").read_text().strip() == "3"
    branch = results[BRANCH].stdout
    assert branch.startswith("::warning title=kvgate: inconclusive::")

    manifest = json.loads((out / "run" / "manifest.json").read_text(encoding="utf-8"))
    run_id, arms = manifest["run_id"], manifest["matrix"]["candidates"]
    markdown = summary.read_text(encoding="utf-8")
    assert markdown.startswith("## ⚠️ kvgate: INCONCLUSIVE (exit 3)") and run_id in markdown
    assert arms and all(f"`{arm}`" in markdown for arm in arms)

    suites = ET.parse(out / "junit.xml").getroot()
    assert suites.tag == "testsuites" and run_id in suites.get("name", "")
    assert [s.get("name") for s in suites] == arms
    assert int(suites.get("failures", "0")) > 0  # inconclusive gates are JUnit failures by default


def test_the_cache_and_upload_steps_name_what_the_run_steps_write(
    gated: tuple[Path, Path, dict[str, Any]],
) -> None:
    out, _, _ = gated
    env = settings(KVGATE_OUT=str(out))
    uses = {s["uses"].split("@")[0]: s for s in steps() if "uses" in s}
    cache = uses["actions/cache"]["with"]
    assert (Path(resolved(cache["path"], env)) / "workload.parquet").is_file()
    assert "env.KVGATE_SUITE" in cache["key"] and "env.KVGATE_MODEL" in cache["key"]
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()"
    uploaded = [Path(p.strip()) for p in resolved(upload["with"]["path"], env).splitlines() if p.strip()]
    assert all(p.exists() for p in uploaded) and out / "run" in uploaded and out / "junit.xml" in uploaded


def test_a_cached_workload_is_not_frozen_again(gated: tuple[Path, Path, dict[str, Any]]) -> None:
    out, summary, _ = gated
    workload = out / "workload" / "workload.parquet"
    before = workload.stat().st_mtime_ns
    (done,) = run_workflow(out, summary, only="Freeze the workload (once per suite and model)").values()
    assert done.returncode == 0 and "the cached workload is used" in done.stdout
    assert workload.stat().st_mtime_ns == before


def test_bad_input_fails_the_job_without_a_run(tmp_path: Path) -> None:
    out, summary = tmp_path / "kvgate-out", tmp_path / "summary.md"
    results = run_workflow(out, summary, KVGATE_SUITE="no/such/suite.toml")
    codes = {name: done.returncode for name, done in results.items()}
    assert codes["Freeze the workload (once per suite and model)"] == 2
    assert "Run the gate" not in codes  # a failed step skips the next ones, except those run always()
    assert codes[BRANCH] == 1
    assert "made no run directory" in summary.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("code", "strict", "exit_code", "annotation"),
    [
        ("0", "false", 0, "kvgate: the gate passed"),
        ("1", "false", 1, "::error title=kvgate: gate failed::"),
        ("3", "false", 0, "::warning title=kvgate: inconclusive::"),
        ("3", "true", 3, "::error title=kvgate: inconclusive::"),
        ("2", "false", 2, "::error title=kvgate: bad input::"),
        ("4", "false", 4, "::error title=kvgate: engine error::"),
        ("70", "false", 70, "::error title=kvgate: exit 70::"),
        ("130", "false", 130, "::error title=kvgate: exit 130::"),
    ],
)
def test_the_exit_code_branch(
    tmp_path: Path, code: str, strict: str, exit_code: int, annotation: str
) -> None:
    out = tmp_path / "kvgate-out"
    out.mkdir()
    (out / "exit-code").write_text(code + "\n")
    (done,) = run_workflow(
        out,
        tmp_path / "summary.md",
        only=BRANCH,
        KVGATE_FAIL_ON_INCONCLUSIVE=strict,
    ).values()
    assert done.returncode == exit_code and done.stdout.startswith(annotation), (done.stdout, done.stderr)
