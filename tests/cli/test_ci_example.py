"""The GitHub Actions example (examples/ci/github-actions.yml) runs as written in a user's repository: its
`run:` steps, in order, in bash as GitHub runs them (`bash --noprofile --norc -eo pipefail`), from the root
of a scratch repository outside kvgate's tree that holds the user's own suite (a trace of 30 requests),
matrix and policy, with the settings the workflow declares and only these changed: the fake engine, the
output folder, the job's files. The install step is checked, not run (kvgate is installed here already)."""

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

from kvgate import __version__

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ENV_EXPRESSION = re.compile(r"^env\.([A-Z_][A-Z0-9_]*)$")
BRANCH = "Pass or fail on the gate's exit code"
FREEZE = "Freeze the workload (once per kvgate, model and suite)"
JUNIT = "Write the JUnit report"
KEY = "Key the workload cache"


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
    """`text` with its `${{ env.NAME }}` expressions replaced; any other expression is refused."""

    def value(match: re.Match[str]) -> str:
        name = ENV_EXPRESSION.match(match.group(1))
        assert name, f"unexpected expression {match.group(0)}"
        return env[name.group(1)]

    return EXPRESSION.sub(value, text)


def user_repository(root: Path) -> Path:
    """A user's repository: their trace of 30 requests, the suite freezing it, a matrix and a policy."""
    gate = root / "gate"
    (gate / "traces").mkdir(parents=True)
    records = [
        {
            "id": f"req-{i}",
            "task": "support" if i % 2 == 0 else "billing",
            "messages": [{"role": "user", "content": f"Ticket {i}: the code is {1000 + i}. Which code?"}],
            "expected": [str(1000 + i)],
            "validator": "substring_any",
            "max_tokens": 8,
        }
        for i in range(30)
    ]
    (gate / "traces" / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (gate / "suite.toml").write_text('name = "support"\n[[trace]]\npath = "traces/requests.jsonl"\n')
    (gate / "matrix.toml").write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3", "streaming-50"]\n'
    )
    (gate / "policy.toml").write_text('tau = 0.05\ncritical = ["task=support"]\nallow_unwinnable = true\n')
    return root


def run_workflow(
    repo: Path, only: str | None = None, **changed: str
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the `run:` steps (or only the one named `only`) in `repo` as a job would; results by step
    name. A step runs when every step before it succeeded, or when its condition is `always()`."""
    env = settings(KVGATE_ENGINE="fake", **changed)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    environ |= env | {
        "GITHUB_STEP_SUMMARY": str(repo.parent / "summary.md"),
        "GITHUB_OUTPUT": str(repo.parent / "output.txt"),
        "GITHUB_WORKSPACE": str(repo),
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
        script = repo.parent / "step.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=repo, env=environ, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        results[step["name"]] = done
        failed = failed or done.returncode != 0
    return results


def outputs(repo: Path) -> dict[str, str]:
    lines = (repo.parent / "output.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The whole workflow once in a user's repository: 30 requests cannot pass τ 5% (inconclusive)."""
    repo = user_repository(tmp_path_factory.mktemp("ci") / "repo")
    return repo, run_workflow(repo)


def test_the_install_step_installs_a_pinned_kvgate_not_the_users_checkout() -> None:
    (install,) = [s for s in steps() if s.get("id") == "install"]
    assert 'pip install "$KVGATE_PACKAGE"' in install["run"] and "kvgate --version" in install["run"]
    assert "pip install ." not in install["run"] and 'pip install ".' not in install["run"]
    assert settings()["KVGATE_PACKAGE"] == f"kvgate[hf,report]=={__version__}"


def test_the_settings_point_into_the_users_repository_and_name_the_gpu_variant() -> None:
    env = settings()
    assert not any(v.startswith("kvgate/") for v in env.values())  # nothing inside kvgate's source tree
    text = WORKFLOW.read_text(encoding="utf-8")
    (job,) = workflow()["jobs"].values()
    assert "vars.KVGATE_RUNNER" in job["runs-on"] and "ubuntu-latest" in job["runs-on"]
    assert "kvgate[vllm,report]" in text and '"device=cuda"' in text and "no GPU" in text


def test_the_workflow_gates_reports_and_warns_on_an_inconclusive_gate(
    gated: tuple[Path, dict[str, Any]],
) -> None:
    repo, results = gated
    out = repo / settings()["KVGATE_OUT"]
    for name, done in results.items():
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    assert (out / "exit-code").read_text().strip() == "3"
    assert results[BRANCH].stdout.startswith("::warning title=kvgate: inconclusive::")

    manifest = json.loads((out / "run" / "manifest.json").read_text(encoding="utf-8"))
    run_id, arms = manifest["run_id"], manifest["matrix"]["candidates"]
    assert arms == ["fp8-e4m3", "streaming-50"] and manifest["workload_path"].endswith("workload.parquet")
    markdown = (repo.parent / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("## ⚠️ kvgate: INCONCLUSIVE (exit 3)") and run_id in markdown
    assert all(f"`{arm}`" in markdown for arm in arms)

    suites = ET.parse(out / "junit.xml").getroot()
    assert suites.tag == "testsuites" and run_id in suites.get("name", "")
    assert [s.get("name") for s in suites] == arms
    # inconclusive does not fail this job, so its JUnit shows no failure: inconclusive gates are skipped
    assert suites.get("failures") == "0" and int(suites.get("skipped", "0")) > 0


def test_the_junit_report_follows_the_jobs_inconclusive_choice(gated: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = gated
    out = repo / settings()["KVGATE_OUT"]
    (done,) = run_workflow(repo, only=JUNIT, KVGATE_FAIL_ON_INCONCLUSIVE="true").values()
    assert done.returncode == 0, done.stderr
    suites = ET.parse(out / "junit.xml").getroot()
    assert int(suites.get("failures", "0")) > 0
    for failure in suites.iter("failure"):
        assert "\n" not in failure.get("message", "") and len(failure.get("message", "")) <= 160


def test_the_cache_key_covers_kvgate_the_model_and_the_suite(gated: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = gated
    uses = {s["uses"].split("@")[0]: s for s in steps() if "uses" in s}
    assert uses["actions/cache"]["with"]["key"] == "${{ steps.key.outputs.key }}"
    (key_step,) = [s for s in steps() if s.get("id") == "key"]
    assert key_step["name"] == KEY
    key = outputs(repo)["key"]
    assert key.startswith(f"kvgate-workload-{__version__}-smollm2-135m-")
    trace = repo / "gate" / "traces" / "requests.jsonl"
    saved = trace.read_text()
    try:
        trace.write_text(saved + saved.splitlines()[0] + "\n")
        (done,) = run_workflow(repo, only=KEY).values()
        assert done.returncode == 0 and outputs(repo)["key"] != key  # an edited trace is frozen again
    finally:
        trace.write_text(saved)
    (done,) = run_workflow(repo, only=KEY, KVGATE_MODEL="org/model@abc123").values()
    assert done.returncode == 0 and "-org_model_abc123-" in outputs(repo)["key"]


def test_the_cache_and_upload_steps_name_what_the_run_steps_write(gated: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = gated
    env = settings()
    out = repo / env["KVGATE_OUT"]
    uses = {s["uses"].split("@")[0]: s for s in steps() if "uses" in s}
    cache = uses["actions/cache"]["with"]
    assert (repo / resolved(cache["path"], env) / "workload.parquet").is_file()
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()"
    uploaded = [repo / p.strip() for p in resolved(upload["with"]["path"], env).splitlines() if p.strip()]
    assert all(p.exists() for p in uploaded) and out / "run" in uploaded and out / "junit.xml" in uploaded


def test_a_cached_workload_is_not_frozen_again(gated: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = gated
    workload = repo / settings()["KVGATE_OUT"] / "workload" / "workload.parquet"
    before = workload.stat().st_mtime_ns
    (done,) = run_workflow(repo, only=FREEZE).values()
    assert done.returncode == 0 and "the cached workload is used" in done.stdout
    assert workload.stat().st_mtime_ns == before


def test_engine_options_reach_the_run(tmp_path: Path) -> None:
    repo = user_repository(tmp_path / "repo")
    results = run_workflow(repo, KVGATE_ENGINE_OPTIONS="timeout_s=60")
    assert results["Run the gate"].returncode == 0
    manifest = json.loads((repo / settings()["KVGATE_OUT"] / "run" / "manifest.json").read_text())
    assert manifest["engine_options"] == {"timeout_s": 60}


def test_bad_input_fails_the_job_without_a_run(tmp_path: Path) -> None:
    repo = user_repository(tmp_path / "repo")
    results = run_workflow(repo, KVGATE_SUITE="gate/no-such-suite.toml")
    codes = {name: done.returncode for name, done in results.items()}
    assert codes[FREEZE] == 2
    assert "Run the gate" not in codes  # a failed step skips the next ones, except those run always()
    assert codes[BRANCH] == 1
    assert "made no run directory" in (repo.parent / "summary.md").read_text(encoding="utf-8")


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
    repo = tmp_path / "repo"
    out = repo / settings()["KVGATE_OUT"]
    out.mkdir(parents=True)
    (out / "exit-code").write_text(code + "\n")
    (done,) = run_workflow(repo, only=BRANCH, KVGATE_FAIL_ON_INCONCLUSIVE=strict).values()
    assert done.returncode == exit_code and done.stdout.startswith(annotation), (done.stdout, done.stderr)
