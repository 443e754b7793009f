"""A suite, matrix, policy, trace or frozen workload given where another kind belongs is named for what it
is, with what to do with it (was: "unknown key 'name'" for a suite given as --policy, "invalid TOML" for
a trace, "not UTF-8 text" for a workload, "is a suite" for a matrix given to -w); one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import finished_fake_run, kvgate

from kvgate.spec_kinds import TOP_KEYS, toml_kind
from kvgate.tomlspec import toml_file_kind, toml_text_kind
from kvgate.workload.suites import _sources

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "smoke.toml"
MATRIX = ROOT / "treatments" / "default.toml"
POLICY = ROOT / "treatments" / "policy.toml"
TRACE_LINE = '{"messages": [{"role": "user", "content": "hi"}], "expected": "hello"}\n'
FREEZE_IT = "freeze it with `kvgate freeze SUITE.toml"
TO_M = "give it to `kvgate run -m`"
TO_POLICY = "give it to --policy"
TO_TRACE = "name it in a suite's [[trace]] table"
TO_W = "a frozen workload goes to `kvgate run -w`"
FROZEN = "is a frozen workload, not a trace (JSON lines): give it to `kvgate run -w`"


@pytest.mark.parametrize(
    ("option", "given", "message"),
    [
        ("--policy", SUITE, f"{SUITE} is a suite, not a policy: {FREEZE_IT}"),
        ("--policy", MATRIX, f"{MATRIX} is a matrix, not a policy: {TO_M}"),
        ("--policy", "trace", f"is a trace (JSON lines), not TOML: {TO_TRACE}"),
        ("--policy", "workload", f"is a Parquet file (a frozen workload or a trace), not a policy: {TO_W}"),
        ("-m", SUITE, f"{SUITE} is a suite, not a matrix: {FREEZE_IT}"),
        ("-m", POLICY, f"{POLICY} is a policy, not a matrix: {TO_POLICY}"),
        ("-m", "workload", "not a matrix: " + TO_W),
        ("-w", MATRIX, f"workload {MATRIX} is a matrix, not a frozen workload: {TO_M}"),
        ("-w", POLICY, f"workload {POLICY} is a policy, not a frozen workload: {TO_POLICY}"),
        ("-w", SUITE, f"workload {SUITE} is a suite, not a frozen workload: freeze it first"),
    ],
)
def test_run_names_the_kind_of_file_it_was_given(
    option: str, given: Path | str, message: str, smoke_workload: Path, tmp_path: Path
) -> None:
    path = _given(given, smoke_workload, tmp_path)
    args = ["-w", smoke_workload] if option != "-w" else []
    result = kvgate("run", "--engine", "fake", "-o", tmp_path / "runs", "--quiet", *args, option, path)
    _one_line(result.exit_code, result.stderr, message)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("command", "given", "message"),
    [
        (["freeze", "{}", "-o", "w.parquet"], MATRIX, f"{MATRIX} is a matrix, not a suite: {TO_M}"),
        (["freeze", "{}", "-o", "w.parquet"], POLICY, f"{POLICY} is a policy, not a suite: {TO_POLICY}"),
        (
            ["freeze", "{}", "-o", "w.parquet"],
            "workload",
            "(a frozen workload or a trace), not a suite: " + TO_W,
        ),
        (["freeze", "{}", "-o", "w.parquet"], "trace", f"is a trace (JSON lines), not TOML: {TO_TRACE}"),
        (
            ["simulate", "--policy", "{}", "--runs", "10"],
            SUITE,
            f"{SUITE} is a suite, not a policy: {FREEZE_IT}",
        ),
        (["init", "{}", "-o", "gate"], SUITE, f"{SUITE} is a suite, not a trace (JSON lines): {FREEZE_IT}"),
        (["init", "{}", "-o", "gate"], MATRIX, f"{MATRIX} is a matrix, not a trace (JSON lines): {TO_M}"),
        (["init", "{}", "-o", "gate"], "workload", FROZEN),  # was: a suite of the workload's rows
        (["freeze", "{}", "-o", "w.parquet"], "suite of workload", FROZEN),  # was: frozen a second time
        (["run", "--engine", "fake", "-w", "{}"], "parquet trace", "not a frozen workload: a Parquet trace"),
        (["freeze", "--check", "{}"], "parquet trace", "not a frozen workload: a Parquet trace"),
    ],
)
def test_other_commands_name_it_too(
    command: list[str], given: Path | str, message: str, smoke_workload: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    path = _given(given, smoke_workload, tmp_path)
    result = kvgate(*[str(path) if a == "{}" else a for a in command])
    _one_line(result.exit_code, result.stderr, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in (path,) if p.parent == tmp_path]
    ), "nothing written"


def test_a_file_of_its_own_kind_with_a_stray_key_still_says_unknown_key(tmp_path: Path) -> None:
    """Only a file holding none of the expected kind's keys is taken for another kind."""
    policy = tmp_path / "p.toml"
    policy.write_text('tau = 0.1\nname = "mine"\n')
    result = kvgate("simulate", "--policy", policy, "--runs", "10")
    _one_line(result.exit_code, result.stderr, f"{policy}: unknown key 'name'")


def test_toml_kind_takes_the_kind_with_most_keys_and_none_on_a_tie() -> None:
    assert toml_kind({"name": "s", "generate": []}, "policy") == "suite"
    assert toml_kind({"matrix": {}, "tau": 0.1}, "suite") is None  # one matrix key, one policy key
    assert toml_kind({"matrix": {}, "tau": 0.1}, "policy") is None  # holds a policy key
    assert toml_kind({"typo": 1}, "policy") is None
    assert toml_kind({}) is None


def test_one_reader_tells_the_kind_of_toml_text_and_of_a_file(tmp_path: Path) -> None:
    """The workload reader (a TOML file given as -w) and the trace reader (TOML text given as a trace) ask
    one function; text that is not TOML, or names no single kind, is None."""
    for path, kind in ((SUITE, "suite"), (MATRIX, "matrix"), (POLICY, "policy")):
        assert toml_text_kind(path.read_text()) == kind
        assert toml_file_kind(path) == kind
    assert toml_text_kind(TRACE_LINE) is None
    assert toml_text_kind("tau = nan\n") is None  # TOML kvgate refuses to read
    assert toml_text_kind("matrix = {}\ntau = 0.1\n") is None
    assert toml_file_kind(tmp_path / "absent.toml") is None
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe")
    assert toml_file_kind(tmp_path / "binary.toml") is None


def test_a_suites_sources_are_its_top_keys() -> None:
    assert set(_sources(ROOT)) <= TOP_KEYS["suite"]


def _given(given: Path | str, workload: Path, folder: Path) -> Path:
    if given == "workload":
        return workload
    if given == "trace":
        trace = folder / "requests.jsonl"
        trace.write_text(TRACE_LINE)
        return trace
    if given == "suite of workload":
        suite = folder / "again.toml"
        suite.write_text(f'name = "again"\n[[trace]]\npath = "{workload}"\nvalidator = "exact"\n')
        return suite
    if given == "parquet trace":
        import pyarrow as pa
        import pyarrow.parquet as pq

        trace = folder / "requests.parquet"
        record = {"messages": '[{"role": "user", "content": "hi"}]', "expected": "hello"}
        pq.write_table(pa.Table.from_pylist([record]), trace)
        return trace
    assert isinstance(given, Path)
    return given


def _one_line(code: int, stderr: str, message: str) -> None:
    assert code == 2, stderr
    assert message in stderr
    assert stderr.startswith("kvgate: error: ") and len(stderr.splitlines()) == 1


def test_a_parquet_file_over_the_size_limit_is_named_too(smoke_workload: Path) -> None:
    """A workload larger than a spec may be (16 MiB) is not "larger than … bytes; give a smaller one"."""
    from kvgate.bounded_file import read_text
    from kvgate.errors import BadInput

    with pytest.raises(BadInput, match=r"is a Parquet file \(a frozen workload or a trace\), not a matrix: "):
        read_text(smoke_workload, 8, "matrix")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_fake_run(tmp_path_factory.mktemp("finished"))


@pytest.mark.parametrize(
    ("given", "what"),
    [
        ("results/index.json", "the results index of run {}"),  # was: "a trace, not a frozen workload"
        ("manifest.json", "the manifest of run {}"),
        ("engine.log", "the engine log of run {}"),
        ("", "a run's folder"),  # was: "workload RUN is not a regular file"
    ],
)
def test_a_runs_own_file_given_as_the_workload_is_named_with_what_to_give(
    finished_run: Path, tmp_path: Path, given: str, what: str
) -> None:
    path = finished_run / given if given else finished_run
    what = what.format(finished_run)
    gated = f"run {finished_run} gated {(finished_run.parent / 'w.parquet').resolve()}"
    runs = tmp_path / "runs"
    result = kvgate("run", "--engine", "fake", "-w", path, "-o", runs, "--quiet")
    resume = f"or continue that run with `kvgate run --resume {finished_run}`"
    _one_line(result.exit_code, result.stderr, f"-w {path} is {what}, not a frozen workload")
    assert f"give a frozen workload .parquet ({gated}), {resume}" in result.stderr, result.stderr
    assert not runs.exists()
    for command in (["freeze", "--check", path], ["simulate", "--runs", "10", "-w", path]):
        result = kvgate(*command)
        _one_line(result.exit_code, result.stderr, f" {path} is {what}, not a frozen workload")
        assert "--resume" not in result.stderr


def test_a_results_part_given_as_the_workload_is_named(finished_run: Path) -> None:
    part = next((finished_run / "results").glob("*/*.parquet"))
    result = kvgate("freeze", "--check", part)
    _one_line(result.exit_code, result.stderr, f"--check {part} is a results part of run {finished_run}")
    resumed = kvgate("run", "--resume", finished_run, "-w", part)  # already resuming: no hint to resume
    _one_line(resumed.exit_code, resumed.stderr, f"-w {part} is a results part of run {finished_run}")
    assert "--resume" not in resumed.stderr
