"""Mistakes a new user makes, refused before anything runs: one line naming the problem and what to do,
exit 2, no run directory (issue: a typo in a critical slice, a workload frozen for another tokenizer, a
folder that is not a model, an arm the engine cannot run, a trace or suite given as the workload, a
changed policy on resume or report). `kvgate run` without -w names the default workload it gates."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli

TRACE = [
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


def kvgate(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def refused(code: int, output: str, *phrases: str) -> None:
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1, output
    for phrase in phrases:
        assert phrase in output, output


@pytest.fixture(scope="module")
def trace_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's own trace of 30 requests in two tasks, frozen with the word tokenizer."""
    folder = tmp_path_factory.mktemp("user")
    (folder / "support.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TRACE))
    (folder / "suite.toml").write_text('name = "support"\n[[trace]]\npath = "support.jsonl"\n')
    workload = folder / "support.words.parquet"
    assert kvgate("freeze", folder / "suite.toml", "-o", workload)[0] == 0
    return workload


@pytest.mark.parametrize(
    ("policy_text", "phrases"),
    [
        ('critical = ["task=suport"]\n', ("task='suport'", "did you mean 'support'?", "critical")),
        ('[slice_tau]\n"tsk=support" = 0.1\n', ("no slice column 'tsk'", "did you mean 'task'?")),
        (
            'allow_unwinnable = true\ncritical = ["task=zzz"]\n',  # refused even when unwinnable is allowed
            ("task='zzz'", "(it has: billing, support)"),
        ),
        (
            'allow_unwinnable = true\ncritical = ["task=support/turns=2"]\n',
            ("turns='2'", "(it has: 1)"),
        ),
        # a cluster column the workload lacks was refused by the report, after every arm had generated
        ('cluster = "tsk"\n', ("policy cluster 'tsk'", "did you mean 'task'?", "correct `cluster`")),
        # a strata typo gated no stratum, silently
        ('strata = ["ctx_buckt"]\n', ("policy strata 'ctx_buckt'", "did you mean 'ctx_bucket'?")),
    ],
)
def test_a_slice_the_workload_lacks_is_refused_with_the_closest(
    tmp_path: Path, trace_workload: Path, policy_text: str, phrases: tuple[str, ...]
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("tau = 0.02\n" + policy_text)
    runs = tmp_path / "runs"
    refused(
        *kvgate("run", "--engine", "fake", "-w", trace_workload, "--policy", policy, "-o", runs), *phrases
    )
    assert not runs.exists()


def test_a_slice_the_workload_has_is_accepted(tmp_path: Path, trace_workload: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('tau = 0.05\nallow_unwinnable = true\ncritical = ["task=support/turns=1"]\n')
    code, output = kvgate(
        "run",
        "--engine",
        "fake",
        "-w",
        trace_workload,
        "--policy",
        policy,
        "-o",
        tmp_path / "runs",
        "--quiet",
    )
    assert code == 3, output  # 15 cases cannot pass at τ 5%: inconclusive, but gated


def test_run_without_a_workload_names_the_default_it_gates(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "--engine", "fake", "-o", str(tmp_path / "runs"), "--quiet"])
    default = tmp_path / "runs" / "workloads" / "smoke.words.parquet"
    assert result.exit_code == 3, result.output
    assert f"no -w given: gating the default suite 'smoke' (24 cases), frozen to {default}" in result.output
    assert default.is_file()


def test_a_word_tokenized_workload_is_refused_for_a_real_engine(tmp_path: Path, trace_workload: Path) -> None:
    started = time.monotonic()
    code, output = kvgate("run", "--engine", "hf", "-w", trace_workload, "-o", tmp_path / "runs")
    refused(
        code,
        output,
        "frozen with the word tokenizer",
        "kvgate freeze SUITE --model smollm2-135m -o",
        "(support)",
    )
    assert time.monotonic() - started < 30  # no model loaded for it
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("files", "phrases"),
    [
        ({"config.json": "{}"}, ("no weights (*.safetensors", "and no tokenizer (tokenizer.json")),
        ({"config.json": "{}", "model.safetensors": ""}, ("no tokenizer (tokenizer.json",)),
    ],
)
def test_a_folder_that_is_not_a_model_names_what_it_lacks(
    tmp_path: Path, smoke_workload: Path, files: dict[str, str], phrases: tuple[str, ...]
) -> None:
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    code, output = kvgate(
        "run", "--engine", "hf", "--model", folder, "-w", smoke_workload, "-o", tmp_path / "r"
    )
    refused(code, output, f"model folder {folder} is not a model an engine can load", *phrases)


def test_eviction_on_vllm_is_refused_from_the_table_without_importing_vllm(
    tmp_path: Path, smoke_workload: Path
) -> None:
    """In a fresh interpreter: refused in under a second of CPU time (wall time on a shared machine
    measures the load), and neither vLLM nor torch imported."""
    script = (
        "import sys, time\n"
        "from click.testing import CliRunner\n"
        "from kvgate.cli import cli\n"
        "t = time.process_time()\n"
        f"r = CliRunner().invoke(cli, ['run', '--engine', 'vllm', '-w', {str(smoke_workload)!r}, "
        f"'-o', {str(tmp_path / 'runs')!r}])\n"
        "cpu = round(time.process_time() - t, 3)\n"
        "print(r.exit_code, cpu, 'vllm' in sys.modules, 'torch' in sys.modules)\n"
        "print(r.output, end='')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    first, message = done.stdout.split("\n", 1)
    code, seconds, vllm_imported, torch_imported = first.split()
    refused(
        int(code),
        message,
        "engine 'vllm' cannot run arm 'streaming-50': it has no eviction",
        "--engine hf",
        "--arms fp8-e4m3",
    )
    assert float(seconds) < 1.0 and vllm_imported == "False" and torch_imported == "False", first


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        ("support.jsonl", ("is a trace, not a frozen workload: freeze it first", "[[trace]]")),
        ("suite.toml", ("is a suite, not a frozen workload: freeze it first", "kvgate freeze")),
    ],
)
def test_a_trace_or_suite_given_as_the_workload_says_to_freeze_it(
    tmp_path: Path, trace_workload: Path, name: str, phrases: tuple[str, ...]
) -> None:
    code, output = kvgate("run", "--engine", "fake", "-w", trace_workload.parent / name, "-o", tmp_path / "r")
    refused(code, output, *phrases)


def test_a_changed_policy_names_the_settings_that_changed(tmp_path: Path, smoke_workload: Path) -> None:
    run_dir = tmp_path / "run"
    assert kvgate("run", "--engine", "fake", "-w", smoke_workload, "--run-dir", run_dir, "--quiet")[0] == 3
    policy = tmp_path / "policy.toml"
    policy.write_text("# stricter\ntau = 0.03\nmin_control_passes = 10\n")
    changed = "tau: 0.05 → 0.03, min_control_passes: 20 → 10"
    refused(
        *kvgate("run", "--resume", run_dir, "--policy", policy),
        f"changed since it started: policy ({changed})",
    )
    refused(*kvgate("report", run_dir, "--policy", policy), changed, "--policy-changed-reason")
    policy.write_text("# the default, spelled out\ntau = 0.05\n")
    refused(*kvgate("report", run_dir, "--policy", policy), "its text only (no setting's value)")
