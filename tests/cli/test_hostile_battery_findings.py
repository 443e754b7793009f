"""What the hostile battery (bench/hostile_battery.py) found, each pinned: a path the system refuses
is bad input in one line, never exit 70; no output is renamed over a named pipe; a negative seed is
refused by its option; the HTML report's matplotlib keeps its config in kvgate's cache, not in $HOME."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import Result
from helpers.cli import finished_fake_run, kvgate

LONG = "x" * 5000
"""A name longer than any file system allows (ENAMETOOLONG)."""


def _refused(result: Result, *words: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    stderr = result.stderr
    assert stderr.startswith("kvgate: error: ") and stderr.count("\n") == 1, stderr[:300]
    assert "internal error" not in stderr and len(stderr) < 400, stderr[:300]
    assert all(w in stderr for w in words), stderr[:300]


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--resume", LONG],
        ["report", LONG],
        ["runs", LONG],
        ["view", LONG, "--no-open"],
    ],
    ids=["run --resume", "report", "runs", "view"],
)
def test_a_path_too_long_is_bad_input_in_one_line(args: list[str]) -> None:
    """Each was exit 70 (OSError: File name too long) on f684a0a."""
    _refused(kvgate(*args), "File name too long", "characters)")


def test_a_link_loop_given_as_a_run_is_bad_input(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = kvgate("report", loop)
    assert result.exit_code == 2 and "internal error" not in result.stderr, result.stderr


def test_init_into_an_existing_file_is_bad_input(tmp_path: Path) -> None:
    """`init -o FILE` was exit 70 (FileExistsError) on f684a0a."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"messages": [{"role": "user", "content": "Code 1?"}], "expected": ["1"]}\n')
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    _refused(kvgate("init", trace, "-o", taken), "File exists")
    assert taken.read_text() == "mine\n"


@pytest.mark.parametrize("kind", ["named pipe", "device"])
def test_freeze_never_renames_over_a_pipe_or_a_device(tmp_path: Path, kind: str) -> None:
    """`freeze -o FIFO` and `freeze -o /dev/null` renamed a plain file over the pipe or the device on
    f684a0a (the battery's run replaced this machine's /dev/null so); here on a null device of its own."""
    target = tmp_path / "target"
    if kind == "device":
        try:
            os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    else:
        os.mkfifo(target)
    before = os.lstat(target).st_mode
    _refused(kvgate("freeze", "smoke", "--limit", "1", "-o", target), "named pipe or a device")
    assert os.lstat(target).st_mode == before


def test_a_negative_seed_is_refused_by_its_option() -> None:
    """`simulate --seed -1` was exit 70 (numpy: expected non-negative integer) on f684a0a."""
    result = kvgate("simulate", "--runs", "10", "--n", "24", "--seed", "-1")
    assert result.exit_code == 2 and "--seed" in result.output and "internal error" not in result.output


def test_matplotlib_config_stays_in_kvgates_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendering HTML wrote ~/.config/matplotlib and ~/.cache/matplotlib (outside the run): the plots
    now point matplotlib at kvgate's cache unless $MPLCONFIGDIR says otherwise."""
    from kvgate.report.render import plots

    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path / "cache"))
    plots._matplotlib()
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "cache" / "matplotlib")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))
    plots._matplotlib()
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "mine")


def test_init_refuses_a_trace_that_is_a_named_pipe(tmp_path: Path) -> None:
    """`init FIFO` waited on the pipe for ever on f684a0a."""
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    _refused(kvgate("init", fifo, "-o", tmp_path / "gate"), "not a regular file")
    assert not (tmp_path / "gate").exists()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested"),
        (b'{"messages": 5}\n', "non-empty list"),
        (b'{"messages": [{"role": 7, "content": null}]}\n', "role"),
        (b'{"messages": [{"role": "user", "content": "\xff"}]}\n', "not UTF-8"),
    ],
    ids=["nested 100,000 deep", "messages not a list", "role not a role", "not UTF-8"],
)
def test_init_reads_its_trace_as_freeze_does(tmp_path: Path, line: bytes, words: str) -> None:
    """A trace nested 100,000 deep was exit 70 (RecursionError) in `init` on f684a0a, and records
    `freeze` refuses were accepted: `init` now reads through freeze's trace reader."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(line)
    _refused(kvgate("init", trace, "-o", tmp_path / "gate"), words)
    _refused(kvgate("freeze", _suite_for(trace), "-o", tmp_path / "w.parquet"), words)


def _suite_for(trace: Path) -> Path:
    suite = trace.with_suffix(".toml")
    body = f'[[trace]]\npath = "{trace}"\nvalidator = "substring_any"\n'
    suite.write_text(f'name = "t"\ndescription = "d"\n\n{body}')
    return suite


def test_a_workload_whose_metadata_is_nested_100000_deep_is_refused(
    smoke_workload: Path, tmp_path: Path
) -> None:
    """`freeze --check` of such a forged workload was exit 70 (RecursionError) on f684a0a."""
    import pyarrow.parquet as pq

    table = pq.read_table(smoke_workload)
    forged = tmp_path / "deep.parquet"
    pq.write_table(
        table.replace_schema_metadata({b"kvgate.workload": b"[" * 100_000 + b"]" * 100_000}), forged
    )
    _refused(kvgate("freeze", "--check", forged), "corrupt kvgate metadata")


def test_an_engine_option_nested_100000_deep_is_refused() -> None:
    result = kvgate("run", "--engine", "fake", "-E", "x=" + "[" * 100_000 + "]" * 100_000)
    assert result.exit_code == 2 and "nested" in result.output and "internal error" not in result.output


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete fake-engine run of 2 cases: the control and one candidate."""
    return finished_fake_run(tmp_path_factory.mktemp("finished"))


def _copy(run: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(run, tmp_path / "run"))


@pytest.mark.parametrize(
    ("rows", "words"),
    [(10**30, "is greater than the maximum of"), (7, "lists 7 rows for")],  # past the bound; in it, wrong
)
def test_an_index_row_count_that_is_not_the_parts_is_refused(
    rows: int, words: str, finished_run: Path, tmp_path: Path
) -> None:
    """An index claiming 10^30 rows for a part was reported (exit 3) on f684a0a."""
    run = _copy(finished_run, tmp_path)
    index = run / "results" / "index.json"
    listed = json.loads(index.read_text())
    for entry in listed["parts"].values():
        entry["rows"] = rows
    index.write_text(json.dumps(listed))
    _refused(kvgate("report", run), words)


def test_resuming_a_manifest_without_its_matrix_is_refused(finished_run: Path, tmp_path: Path) -> None:
    """`run --resume` of a manifest lacking matrix_text was exit 70 (KeyError) on f684a0a."""
    run = _copy(finished_run, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["matrix_text"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    _refused(kvgate("run", "--resume", run), "matrix_text")


def test_simulate_refuses_a_slice_too_large_to_simulate() -> None:
    """`simulate --n 10000000` ran past a minute and 1 GiB on f684a0a."""
    _refused(kvgate("simulate", "--runs", "20", "--n", "10000000"), "--n must be in [1, 1000000]")


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_runs_lists_a_run_folder_whose_name_is_not_utf8(
    finished_run: Path, tmp_path: Path, as_json: bool
) -> None:
    """`kvgate runs DIR` was exit 70 (UnicodeEncodeError) when DIR held such a folder on f684a0a."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / os.fsdecode(b"r\xff")).symlink_to(finished_run)
    result = kvgate("runs", runs, *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output[-400:]
    if as_json:
        (row,) = json.loads(result.output)
        assert "not UTF-8" in row["note"] and row["path"].endswith("r\\xff"), row
    else:
        assert "r\\xff" in result.output, result.output
