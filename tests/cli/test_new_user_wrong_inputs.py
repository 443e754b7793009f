"""Wrong inputs a new user gives the README's commands, each refused in one line before any work (exit 2)
where it was a lost file, a silent no-op, a misleading line or an internal error: an output path over a
workload, suite, trace or run file (`--samples smoke.parquet` replaced the workload), an empty path (the
current folder), a suite given twice, a --model typo printed into init's commands, flags that need
--compare or --policy ignored without them, a run given to `kvgate runs` or as `-o`, a file given as a
run, and a --serve port that is taken (exit 70)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from helpers.cli import finished_fake_run, kvgate

ROOT = Path(__file__).resolve().parents[2]
TRACE_LINE = '{"messages": [{"role": "user", "content": "hi"}], "expected": "hello"}\n'


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete fake-engine run of 2 smoke cases: the control and one candidate."""
    return finished_fake_run(tmp_path_factory.mktemp("finished"))


def _refused(args: list[object], message: str) -> None:
    result = kvgate(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("kvgate: error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr, result.stderr
    assert result.stdout == "", "refused before any report is printed"


def _inputs(folder: Path, workload: Path) -> dict[str, Path]:
    """A copy of each kind of input kvgate reads, to name as an output."""
    folder.mkdir(exist_ok=True)
    copies = {
        "workload": folder / "smoke.parquet",
        "suite": folder / "suite.toml",
        "policy": folder / "policy.toml",
        "trace": folder / "requests.jsonl",
    }
    copies["workload"].write_bytes(workload.read_bytes())
    copies["suite"].write_text((ROOT / "suites" / "smoke.toml").read_text())
    copies["policy"].write_text((ROOT / "treatments" / "policy.toml").read_text())
    copies["trace"].write_text(TRACE_LINE)
    return copies


HELD = {
    "workload": "is a Parquet file (a frozen workload, a trace or a run's results)",
    "suite": "is a suite",
    "policy": "is a policy",
    "trace": "is a trace (JSON lines)",
}


@pytest.mark.parametrize(
    ("kind", "option"),
    [
        (kind, option)
        for kind in HELD
        for option in ("--samples", "-o", "view -o", "freeze -o")
        if (kind, option) != ("workload", "freeze -o")  # a workload is frozen again over a workload
    ],
)
def test_an_output_over_an_input_is_refused_and_the_input_kept(
    kind: str, option: str, finished_run: Path, tmp_path: Path
) -> None:
    path = _inputs(tmp_path, finished_run.parent / "w.parquet")[kind]
    before = path.read_bytes()
    args: list[object] = {
        "--samples": ["report", finished_run, "--samples", path],
        "-o": ["report", finished_run, "-o", path],
        "view -o": ["view", finished_run, "--no-open", "-o", path],
        "freeze -o": ["freeze", "smoke", "--limit", "2", "-o", path],
    }[option]
    _refused(args, f"{path} {HELD[kind]}; writing ")
    assert path.read_bytes() == before


def test_a_workload_is_still_frozen_over_a_workload(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    for _ in range(2):
        assert kvgate("freeze", "smoke", "--limit", "2", "-o", out).exit_code == 0


@pytest.mark.parametrize("target", ["manifest.json", "results/index.json", "results/new.md", ".lock"])
def test_no_output_goes_into_a_runs_own_files(target: str, finished_run: Path) -> None:
    path = finished_run / target
    before = path.read_bytes() if path.exists() else None
    _refused(["report", finished_run, "-o", path], f"is a file of run {finished_run}, which kvgate verifies")
    _refused(["freeze", "smoke", "-o", path], f"is a file of run {finished_run}")
    assert (path.read_bytes() if path.exists() else None) == before
    assert kvgate("report", finished_run).exit_code in (0, 1, 3), "the run still verifies"


def test_a_report_beside_a_runs_files_is_written(finished_run: Path) -> None:
    assert kvgate("report", finished_run, "--format", "md", "-o", finished_run / "report.md").exit_code in (
        0,
        1,
        3,
    )
    assert kvgate("view", finished_run, "--no-open").exit_code == 0
    assert kvgate("report", finished_run).exit_code in (0, 1, 3)


def test_an_unwritable_output_is_refused_before_the_run_is_read(finished_run: Path, tmp_path: Path) -> None:
    """A file where a folder belongs was found only after the whole report was printed."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    _refused(["report", finished_run, "--samples", blocker / "s.jsonl"], f"{blocker} is a file, not a folder")
    _refused(
        ["report", finished_run, "--format", "md,json", "-o", blocker],
        "several formats are written into a folder",
    )
    _refused(["freeze", "smoke", "-o", blocker / "w.parquet"], f"{blocker} is a file, not a folder")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize(
    "args",
    [
        ["report", "{run}", "--samples", "/proc/kvgate-samples.jsonl"],
        ["report", "{run}", "-o", "/proc/kvgate-report.txt"],
        ["report", "{run}", "--format", "md,json", "-o", "/proc/kvgate-reports"],
        ["view", "{run}", "--no-open", "-o", "/proc/kvgate-report.html"],
        ["freeze", "smoke", "--limit", "1", "-o", "/proc/kvgate-w.parquet"],
    ],
)
def test_a_folder_no_file_can_be_made_in_is_refused_before_any_work(
    finished_run: Path, args: list[str]
) -> None:
    """As root, /proc passed the permission check; `--samples /proc/x` failed only after the whole report
    was printed (and `freeze -o /proc/x` after the suite was frozen)."""
    _refused([str(a).format(run=finished_run) for a in args], "/proc ")


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{run}", "-o", "-"],
        ["report", "{run}", "--samples", "-"],
        ["view", "{run}", "--no-open", "-o", "-"],
        ["freeze", "smoke", "--limit", "1", "-o", "-"],
    ],
)
def test_a_dash_is_no_stdout_and_no_file(
    finished_run: Path, args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report RUN -o -` wrote the report into a file named "-" in the current folder, printing nothing."""
    monkeypatch.chdir(tmp_path)
    _refused([str(a).format(run=finished_run) for a in args], "to '-': kvgate takes it for a file")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--engine", "fake", "-w", ""],
        ["run", "--engine", "fake", "--policy", ""],
        ["run", "--engine", "fake", "-o", ""],
        ["freeze", "smoke", "-o", ""],
        ["freeze", "--check", ""],
        ["report", ""],
        ["init", ""],
        ["simulate", "--policy", ""],
        ["runs", ""],
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(args, "the path is empty; name a file or folder")
    assert list(tmp_path.iterdir()) == []


def test_a_suite_given_twice_or_empty_is_named(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    _refused(["freeze", "smoke", "smoke", "-o", out], "suite 'smoke' is given twice: name each suite once")
    _refused(["freeze", "", "-o", out], "a SUITE is empty")
    shipped = ROOT / "suites" / "smoke.toml"  # was: "duplicate case_id '…' in the workload", after freezing
    _refused(["freeze", shipped, "smoke", "-o", out], f"{shipped} and smoke are both suite 'smoke'")
    assert not out.exists()


def test_init_refuses_a_model_typo_rather_than_print_it(tmp_path: Path) -> None:
    trace = tmp_path / "requests.jsonl"
    trace.write_text(TRACE_LINE)
    _refused(
        ["init", trace, "-o", tmp_path / "gate", "--model", "smollm2-135"], "unknown model 'smollm2-135'"
    )
    assert not (tmp_path / "gate").exists()


@pytest.mark.parametrize(
    ("flag", "needs"),
    [
        (["--fail-on-regression"], "--compare BASELINE_RUN"),
        (["--allow-different"], "--compare BASELINE_RUN"),
        (["--policy-changed-reason", "why"], "--policy FILE"),
        (["--policy-unsafe-reason", "why"], "--policy FILE"),
        (["--junit-inconclusive", "skip"], "--format junit"),  # was: ignored by the table
        (["--junit-inconclusive", "failure", "--format", "md,json", "-o", "out"], "--format junit"),
    ],
)
def test_report_flags_that_need_another_are_refused_without_it(
    flag: list[str], needs: str, finished_run: Path
) -> None:
    _refused(["report", finished_run, *flag], f"{flag[0]} applies only with {needs}")


@pytest.mark.parametrize(("name", "meant"), [("report.json", "json"), ("r.MD", "md"), ("junit.xml", "junit")])
def test_an_output_named_for_another_format_needs_the_format(
    finished_run: Path, tmp_path: Path, name: str, meant: str
) -> None:
    """`report RUN -o report.json` wrote the table into report.json."""
    out = tmp_path / name
    _refused(
        ["report", finished_run, "-o", out],
        f"would hold the table (the default --format): add --format {meant}",
    )
    assert not out.exists()
    assert kvgate("report", finished_run, "-o", out, "--format", meant).exit_code in (0, 1, 3)
    table = tmp_path / "table.txt"
    assert kvgate("report", finished_run, "-o", table).exit_code in (0, 1, 3) and table.is_file()


def test_a_run_compared_with_itself_is_refused(finished_run: Path) -> None:
    """`report RUN --compare RUN` compared the run with itself: every delta 0, no regression."""
    _refused(["report", finished_run, "--compare", f"{finished_run}/."], "is the run reported")


def test_view_port_without_serve_is_refused_rather_than_ignored(finished_run: Path, tmp_path: Path) -> None:
    """`view RUN --port 8080 --no-open` wrote the report and ignored the port, serving nothing."""
    html = tmp_path / "r.html"
    _refused(
        ["view", finished_run, "--port", "8080", "--no-open", "-o", html], "--port applies only with --serve"
    )
    assert not html.exists()


def test_a_run_is_no_folder_of_runs(finished_run: Path, smoke_workload: Path) -> None:
    """`kvgate runs RUN` said "no runs in RUN" (exit 0); `run -o RUN` made a new run inside it."""
    _refused(
        ["runs", finished_run],
        f"{finished_run} is a run, not a folder of runs: `kvgate report {finished_run}`",
    )
    before = sorted(p.name for p in finished_run.iterdir())
    for args in (["-o", finished_run], ["--run-dir", finished_run / "new"]):
        _refused(["run", "--engine", "fake", "-w", smoke_workload, "--quiet", *args], "not a folder of runs")
    assert sorted(p.name for p in finished_run.iterdir()) == before


def test_runs_before_any_run_says_the_folder_does_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kvgate runs` before the first run said "runs is not a folder of runs"."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KVGATE_RUNS", raising=False)
    _refused(["runs"], "runs does not exist, so it holds no runs: `kvgate run` makes them there")
    (tmp_path / "file").write_text("")
    _refused(["runs", tmp_path / "file"], "is not a folder of runs")


def test_a_file_given_as_a_run_is_named(finished_run: Path) -> None:
    workload = finished_run.parent / "w.parquet"
    message = f"{workload} is a file, not a run's folder"  # was "cannot read manifest …: Not a directory"
    _refused(["report", workload], message)
    _refused(["report", finished_run, "--compare", workload], message)
    _refused(["run", "--resume", workload], message)


def test_view_serve_on_a_taken_port_is_refused_before_the_report_is_rendered(
    finished_run: Path, tmp_path: Path
) -> None:
    """The taken port was found only after the report was rendered and written ("kvgate: wrote …")."""
    html = tmp_path / "r.html"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _refused(
            ["view", finished_run, "--serve", "--port", port, "-o", html],
            f"cannot serve on 127.0.0.1:{port}: ",
        )
    assert not html.exists()


def test_a_workload_or_trace_cut_short_says_to_write_it_again(finished_run: Path, tmp_path: Path) -> None:
    """It named the Parquet reader's complaint alone ("magic bytes not found in footer")."""
    cut = tmp_path / "cut.parquet"
    cut.write_bytes((finished_run.parent / "w.parquet").read_bytes()[:3000])
    for args in (["freeze", "--check", cut], ["run", "--engine", "fake", "-w", cut, "-o", tmp_path / "runs"]):
        _refused(args, "is not readable Parquet (")
        _refused(args, "): it is damaged or cut short; freeze it again (or copy it whole)")
    _refused(["init", cut, "-o", tmp_path / "gate"], "it is damaged or cut short; export it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.parquet"]


def test_resume_with_a_runs_folder_is_refused_rather_than_ignored(finished_run: Path, tmp_path: Path) -> None:
    _refused(["run", "--resume", finished_run, "-o", tmp_path / "elsewhere"], "leave -o out")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("kind", ["named pipe", "/dev/full"])
def test_freeze_to_a_pipe_or_a_device_is_refused_before_the_suite_is_frozen(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`freeze smoke -o /dev/full` was refused by the writer, once the whole suite was frozen."""
    import kvgate.workload.freeze

    target = Path(kind)
    if kind == "named pipe":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif not target.exists():
        pytest.skip(f"{kind} is not on this machine")
    frozen: list[object] = []
    monkeypatch.setattr(kvgate.workload.freeze, "freeze", lambda *a, **k: frozen.append(a) or "sha")
    _refused(["freeze", "smoke", "-o", target], f"cannot write a workload to {target}: it is a named pipe or")
    assert frozen == [], "the suite was frozen before the output was checked"


@pytest.mark.parametrize("name", ["report.json", "r.MD", "junit.xml", "w.parquet", "m.toml"])
def test_run_o_named_like_a_file_is_refused_not_made_a_folder(
    name: str, smoke_workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run -o report.json` (there being no such file) made a folder report.json/ and the run in it."""
    monkeypatch.chdir(tmp_path)
    _refused(
        ["run", "--engine", "fake", "-w", smoke_workload, "--quiet", "-o", name],
        f"{name} is named like a file ({Path(name).suffix}), but -o (or $KVGATE_RUNS) names the folder",
    )
    monkeypatch.setenv("KVGATE_RUNS", name)
    _refused(["run", "--engine", "fake", "-w", smoke_workload, "--quiet"], "`kvgate report RUN -o FILE`")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["report.json", "out.HTML"])
def test_run_dir_named_like_a_file_is_refused_not_made_a_folder(
    name: str, smoke_workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --run-dir report.json` made a folder report.json/ and the run in it."""
    monkeypatch.chdir(tmp_path)
    _refused(
        ["run", "--engine", "fake", "-w", smoke_workload, "--quiet", "--run-dir", name],
        f"--run-dir {name} is named like a file ({Path(name).suffix}), but it names the new run's folder",
    )
    assert list(tmp_path.iterdir()) == []


def test_an_existing_empty_run_dir_named_like_a_file_still_takes_the_run(
    smoke_workload: Path, tmp_path: Path
) -> None:
    run = tmp_path / "nightly.json"
    run.mkdir()
    ran = kvgate("run", "--engine", "fake", "-w", smoke_workload, "--limit", 2, "--quiet", "--run-dir", run)
    assert ran.exit_code in (0, 1, 3), ran.output
    assert (run / "manifest.json").is_file()


def test_an_existing_runs_folder_named_like_a_file_still_takes_runs(
    smoke_workload: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "old.json"
    runs.mkdir()
    ran = kvgate("run", "--engine", "fake", "-w", smoke_workload, "--limit", 2, "--quiet", "-o", runs)
    assert ran.exit_code in (0, 1, 3), ran.output
    assert len(list(runs.iterdir())) == 1


@pytest.mark.parametrize(
    ("given", "written"), [("JSON", ["r"]), ("Md", ["r"]), ("md,JSON", ["report.json", "report.md"])]
)
def test_format_names_are_taken_case_aside(
    finished_run: Path, tmp_path: Path, given: str, written: list[str]
) -> None:
    """`--format JSON` was "unknown format 'JSON'; known: html, json, junit, md, table"."""
    result = kvgate("report", finished_run, "--format", given, "-o", tmp_path / "r")
    assert result.exit_code in (0, 1, 3), result.output
    folder = tmp_path / "r" if len(written) > 1 else tmp_path
    assert sorted(p.name for p in folder.iterdir()) == written
    if given == "JSON":
        assert "decision" in json.loads((tmp_path / "r").read_text())


@pytest.mark.parametrize("given", ["JSN", "jsn", "md,Jsonn"])
def test_a_format_typo_suggests_the_nearest(finished_run: Path, given: str) -> None:
    typo = given.split(",")[-1]
    _refused(
        ["report", finished_run, "--format", given, "-o", "out"],
        f"unknown format {typo!r}; did you mean 'json'?",
    )
