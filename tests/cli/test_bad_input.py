"""Bad input to `kvgate run`: one line naming the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvgate.cli import cli


def run(args: list[str], runs: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["run", "--engine", "fake", "-o", str(runs), "--quiet", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("policy_text", "message"),
    [
        ("tau = 1.5\n", "tau must be in [0, 1], got 1.5"),
        ("tau = -0.1\n", "tau must be in [0, 1], got -0.1"),
        ("tua = 0.1\n", "unknown key 'tua'; did you mean 'tau'?"),
        ("rule = 'median'\n", "rule must be one of upper_bound, point"),
    ],
)
def test_bad_policy(tmp_path: Path, smoke_workload: Path, policy_text: str, message: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text)
    code, output = run(["-w", str(smoke_workload), "--policy", str(policy)], tmp_path / "runs")
    assert code == 2
    assert message in output
    assert len(output.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_unknown_treatment_in_matrix(tmp_path: Path, smoke_workload: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["streamin-50"]\n')
    code, output = run(["-w", str(smoke_workload), "-m", str(matrix)], tmp_path / "runs")
    assert code == 2
    assert "unknown treatment 'streamin-50'; did you mean 'streaming-50'?" in output


def test_unknown_treatment_key(tmp_path: Path, smoke_workload: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["ev"]\n'
        '[treatment.ev]\nkind = "eviction"\nmethod = "snapkv"\nratoi = 0.5\n'
    )
    code, output = run(["-w", str(smoke_workload), "-m", str(matrix)], tmp_path / "runs")
    assert code == 2
    assert "unknown key 'ratoi'; did you mean 'ratio'?" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "vlm"], "unknown engine 'vlm'; did you mean 'vllm'?"),
        (["--model", "smollm2-13m"], "unknown model 'smollm2-13m'; did you mean 'smollm2-135m'?"),
        (["-m", "defualt"], "unknown matrix 'defualt'; did you mean 'default'?"),
        (["-w", "missing.parquet"], "workload missing.parquet does not exist"),
        (["--limit", "0"], "--limit must be ≥ 1 and ≤ 10,000,000, got 0"),
        (["--limit", str(10**23)], f"--limit must be ≥ 1 and ≤ 10,000,000, got {10**23}"),  # was: stored
    ],
)
def test_unknown_names(tmp_path: Path, smoke_workload: Path, args: list[str], message: str) -> None:
    base = [] if "-w" in args else ["-w", str(smoke_workload)]
    code, output = run([*base, *args], tmp_path / "runs")
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output


# --- every TOML spec is read one way: a regular UTF-8 file, its size and depth bounded ---------------

MATRIX_TEXT = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n'
DEEP_TOML = "[" + ".".join(["a"] * 5000) + "]\nx = 1\n"
HUGE_TOML = "# " + "x" * (1 << 24) + "\n"


@pytest.fixture(scope="module")
def finished_run(smoke_workload: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the smoke workload on the fake engine."""
    run_dir = tmp_path_factory.mktemp("bad-input") / "run"
    result = CliRunner().invoke(
        cli, ["run", "--engine", "fake", "-w", str(smoke_workload), "--run-dir", str(run_dir), "--quiet"]
    )
    assert result.exit_code in (0, 1, 3), result.output  # a verdict, whichever
    return run_dir


SPEC_DAMAGE = {
    "not utf-8": (lambda p, text: p.write_bytes(b"\xff" + text.encode()), "is not UTF-8 text (byte 0)"),
    "deep headers": (lambda p, text: p.write_text(DEEP_TOML), "nested deeper than 64 levels"),
    "over 16 MiB": (lambda p, text: p.write_text(HUGE_TOML + text), "is larger than 16777216 bytes"),
    "named pipe": (lambda p, text: os.mkfifo(p), "is not a regular file (a named pipe)"),
    "link to a device": (lambda p, text: p.symlink_to("/dev/zero"), "is not a regular file (a device)"),
    "folder": (lambda p, text: p.mkdir(), "is not a regular file (a folder)"),
}
SPEC_USE = {
    "run --policy": lambda w, p, o: ["run", "--engine", "fake", "-w", w, "--policy", p, "-o", o],
    "run -m": lambda w, p, o: ["run", "--engine", "fake", "-w", w, "-m", p, "-o", o],
    "run -m --arms": lambda w, p, o: [
        "run",
        "--engine",
        "fake",
        "-w",
        w,
        "-m",
        p,
        "--arms",
        "fp8-e4m3",
        "-o",
        o,
    ],
    "simulate --policy": lambda w, p, o: ["simulate", "--policy", p, "--runs", "10"],
    "report --policy": lambda w, p, o: ["report", o, "--policy", p, "--policy-changed-reason", "fuzz"],
}


@pytest.mark.parametrize("damage", sorted(SPEC_DAMAGE))
@pytest.mark.parametrize("use", sorted(SPEC_USE))
def test_a_spec_file_is_read_one_bounded_way(
    tmp_path: Path, smoke_workload: Path, finished_run: Path, damage: str, use: str
) -> None:
    """A policy or matrix that is not UTF-8, nests too deep, is too big or is not a regular file is
    refused in one line, exit 2, the same way wherever it is read."""
    spec = tmp_path / "spec.toml"
    make, message = SPEC_DAMAGE[damage]
    make(spec, "tau = 0.1\n" if "policy" in use else MATRIX_TEXT)
    out = finished_run if use.startswith("report") else tmp_path / "runs"
    result = CliRunner().invoke(cli, SPEC_USE[use](str(smoke_workload), str(spec), str(out)))
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr[:300]
    assert not (tmp_path / "runs").exists()


INDEX_DAMAGE = {
    "named pipe": (lambda p: os.mkfifo(p), "is not a regular file (a named pipe)"),
    "link to /dev/zero": (lambda p: p.symlink_to("/dev/zero"), "is not a regular file (a device)"),
    "deep JSON": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested deeper than 64 levels"),
    "not UTF-8": (lambda p: p.write_bytes(b'{"\xff": 1}'), "is not UTF-8 text (byte 2)"),
}


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
@pytest.mark.parametrize("command", ["report", "run --resume"])
def test_a_run_index_that_is_not_a_json_file_is_refused(
    tmp_path: Path, finished_run: Path, damage: str, command: str
) -> None:
    """`results/index.json` as a pipe (once a hang), a link to an endless device (once unbounded
    memory) or deep JSON (once exit 70) is refused in one line, exit 2, by `report` and `--resume`."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    index = run_dir / "results" / "index.json"
    index.unlink()
    make, message = INDEX_DAMAGE[damage]
    make(index)
    args = ["report", str(run_dir)] if command == "report" else ["run", "--resume", str(run_dir), "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr[:300]


@pytest.mark.parametrize("how", ["deleted", "a file", "a link"])
def test_a_run_without_its_results_folder_is_not_complete(
    tmp_path: Path, finished_run: Path, how: str
) -> None:
    """A run whose `results/` is gone (once exit 70), a file, or a link elsewhere is refused, exit 2."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    shutil.rmtree(run_dir / "results")
    if how == "a file":
        (run_dir / "results").write_text("")
    elif how == "a link":
        shutil.copytree(finished_run / "results", tmp_path / "elsewhere")
        (run_dir / "results").symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert "not a complete run" in result.stderr and result.stderr.count("\n") == 1, result.stderr[:300]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://127.0.0.1:8000", "is not an http:// or https:// URL with a host"),
        ("http://", "is not an http:// or https:// URL with a host"),
        ("http:///v1", "is not an http:// or https:// URL with a host"),
        ("http://127.0.0.1:99999", "Port out of range"),
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:8000/ v1", "holds a space or control character"),
    ],
)
def test_an_endpoint_that_can_never_work_is_bad_input(
    tmp_path: Path, smoke_workload: Path, url: str, message: str
) -> None:
    """Once reported as an engine error (exit 4) after the run began; now refused before, exit 2."""
    args = ["run", "-w", str(smoke_workload), "--endpoint", f"*={url}", "-o", str(tmp_path / "runs")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output[-300:]
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "runs").exists()


NOT_UTF8 = "x\udcff"
"""A name holding the byte 0xff, as Python hands over such a command-line argument."""
PATH_ARGS = {
    "run -w": lambda w, t: ["run", "--engine", "fake", "-w", str(t / f"{NOT_UTF8}.parquet"), "-o", str(t)],
    "run -o": lambda w, t: ["run", "--engine", "fake", "-w", w, "-o", str(t / NOT_UTF8)],
    "run --run-dir": lambda w, t: ["run", "--engine", "fake", "-w", w, "--run-dir", str(t / NOT_UTF8)],
    "run --resume": lambda w, t: ["run", "--resume", str(t / NOT_UTF8)],
    "run --policy": lambda w, t: ["run", "--engine", "fake", "-w", w, "--policy", str(t / NOT_UTF8)],
    "freeze -o": lambda w, t: ["freeze", "smoke", "-o", str(t / f"{NOT_UTF8}.parquet")],
    "freeze --check": lambda w, t: ["freeze", "--check", str(t / f"{NOT_UTF8}.parquet")],
    "simulate -w": lambda w, t: ["simulate", "-w", str(t / f"{NOT_UTF8}.parquet"), "--runs", "10"],
    "report -o": lambda w, t: ["report", str(t), "-o", str(t / f"{NOT_UTF8}.json")],
}


@pytest.mark.parametrize("where", sorted(PATH_ARGS))
def test_a_path_that_is_not_utf8_is_refused(tmp_path: Path, smoke_workload: Path, where: str) -> None:
    """Once exit 70 (a UnicodeEncodeError writing or printing it), even when the file exists."""
    shutil.copy(smoke_workload, tmp_path / f"{NOT_UTF8}.parquet")
    before = sorted(tmp_path.iterdir())
    result = CliRunner().invoke(cli, PATH_ARGS[where](str(smoke_workload), tmp_path))
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert "not UTF-8; rename" in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert sorted(tmp_path.iterdir()) == before


def test_a_current_folder_that_is_not_utf8_is_refused(
    tmp_path: Path, smoke_workload: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / NOT_UTF8
    folder.mkdir()
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(cli, ["run", "--engine", "fake", "-w", str(smoke_workload)])
    assert result.exit_code == 2 and "run kvgate from a folder whose path is UTF-8" in result.stderr
    assert list(folder.iterdir()) == []


LOG_DAMAGE = {
    "a link out": lambda log, outside: log.symlink_to(outside / "planted.log"),
    "a link to a folder out": lambda log, outside: log.symlink_to(outside),
    "a named pipe": lambda log, outside: os.mkfifo(log),
}


@pytest.mark.parametrize("damage", sorted(LOG_DAMAGE))
def test_resume_never_writes_through_a_planted_engine_log(
    tmp_path: Path, finished_run: Path, damage: str
) -> None:
    """`--resume` once appended its engine output through an `engine.log` link, creating a file outside
    the run directory. Run in a child process: the log redirect acts on file descriptor 2."""
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    shutil.copytree(finished_run, run_dir)
    shutil.rmtree(run_dir / "results")  # rows to generate again, so the engine runs
    (run_dir / "engine.log").unlink(missing_ok=True)
    outside.mkdir()
    LOG_DAMAGE[damage](run_dir / "engine.log", outside)
    argv = [sys.executable, "-c", "from kvgate.cli import main; main()", "run", "--resume", str(run_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert list(outside.iterdir()) == [], "a file was written outside the run directory"
    assert done.returncode == 2, done.stderr[-300:]
    refusal = done.stderr.strip().splitlines()[-1]
    assert "engine.log is a link" in refusal or "engine.log is not a regular file" in refusal, refusal


@pytest.mark.parametrize("n_candidates", [65, 500, 100_000])
def test_a_matrix_with_too_many_candidates_is_refused_naming_the_bound(
    tmp_path: Path, smoke_workload: Path, n_candidates: int
) -> None:
    """100,000 candidates were accepted (days of work) and an HTML report of 500 arms did not finish in
    9 minutes; a matrix now holds at most MAX_CANDIDATES."""
    names = ", ".join(f'"q{i}"' for i in range(n_candidates))
    matrix = tmp_path / "m.toml"
    matrix.write_text(f'[matrix]\ncontrol = "full"\ncandidates = [{names}]\n')
    code, output = run(["-w", str(smoke_workload), "-m", str(matrix)], tmp_path / "runs")
    assert code == 2 and f"{n_candidates} candidates, over the most a matrix may hold (64)" in output, output
    assert len(output.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("n_cases", "aa", "refused"), [(3_400_000, True, True), (5_000_000, False, False)])
def test_a_run_of_too_many_generations_is_refused(n_cases: int, aa: bool, refused: bool) -> None:
    from kvgate.errors import BadInput
    from kvgate.treatments.matrix import check_run_size, parse_matrix_text

    text = f'[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = {str(aa).lower()}\n'
    matrix = parse_matrix_text(text, "m", "m.toml")
    if refused:
        with pytest.raises(
            BadInput, match=r"3 × 3400000 = 10200000 generations, over the most one run may \(10000000\)"
        ):
            check_run_size(matrix, n_cases)
    else:
        check_run_size(matrix, n_cases)  # 2 × 5,000,000: at the bound, allowed


def _bomb(source: Path, target: Path, kind: str) -> None:
    """A small file that decodes to far more than its size allows: one row's token ids 20M zeros
    (run-length encoded), or every row's messages one 100 KB string behind a dictionary index."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    meta = table.schema.metadata
    if kind == "token ids":
        n = table.num_rows
        offsets = pa.array([0, 20_000_000] + [20_000_000] * (n - 1), pa.int32())
        ids = pa.ListArray.from_arrays(offsets, pa.array(np.zeros(20_000_000, dtype=np.int32)))
        table = table.set_column(table.schema.get_field_index("prompt_token_ids"), "prompt_token_ids", ids)
    else:
        rows = 2_000
        table = table.take(pa.array([i % table.num_rows for i in range(rows)]))
        text = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["m" * 100_000]))
        table = table.set_column(table.schema.get_field_index("messages"), "messages", text)
        import json

        declared = json.loads(meta[b"kvgate.workload"]) | {"n_cases": rows}
        meta = {**meta, b"kvgate.workload": json.dumps(declared).encode()}
    pq.write_table(table.replace_schema_metadata(meta), target, compression="zstd")


@pytest.mark.parametrize("kind", ["token ids", "text"])
@pytest.mark.parametrize("command", ["freeze --check", "run -w", "simulate -w"])
def test_a_workload_that_decodes_beyond_its_size_is_refused_before_it_is_built(
    tmp_path: Path, smoke_workload: Path, kind: str, command: str
) -> None:
    """A 14 KB workload once decoded to 1.2 GB (peak 1.6–1.8 GiB) before it was refused."""
    bomb = tmp_path / "bomb.parquet"
    _bomb(smoke_workload, bomb, kind)
    assert bomb.stat().st_size < 1 << 20
    args = {
        "freeze --check": ["freeze", "--check", str(bomb)],
        "run -w": ["run", "--engine", "fake", "-w", str(bomb), "-o", str(tmp_path / "runs")],
        "simulate -w": ["simulate", "-w", str(bomb), "--runs", "10"],
    }[command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output[-300:]
    assert "would take more memory than its size allows" in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_simulate_verifies_the_workload_as_run_does(tmp_path: Path, smoke_workload: Path) -> None:
    """`simulate -w` once simulated a workload `freeze --check` refuses (rows edited after freezing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(smoke_workload)
    column = table.schema.get_field_index("critical")
    table = table.set_column(column, "critical", pa.array([True] * table.num_rows))
    pq.write_table(table, tmp_path / "edited.parquet")
    for args in (["freeze", "--check"], ["simulate", "--runs", "10", "-w"]):
        result = CliRunner().invoke(cli, [*args, str(tmp_path / "edited.parquet")])
        assert result.exit_code == 2 and "do not match its content sha256" in result.stderr, result.output


@pytest.mark.parametrize("workers", ["0", "1025", "1000000000"])
def test_absurd_ray_workers_are_refused_before_a_cluster_starts(
    tmp_path: Path, smoke_workload: Path, workers: str
) -> None:
    """`--ray-workers 1000000000` once started a cluster; it is now refused naming the bound."""
    args = ["-w", str(smoke_workload), "--executor", "ray", "--ray-workers", workers]
    code, output = run(args, tmp_path / "runs")
    assert code == 2 and f"--ray-workers must be in [1, 1024], got {workers}" in output, output


def test_a_ray_that_cannot_start_is_an_engine_error_with_its_reason(
    tmp_path: Path, smoke_workload: Path
) -> None:
    """A Ray start that fails on this machine (here: its temp folder cannot be made) was exit 70."""
    pytest.importorskip("ray")
    argv = [sys.executable, "-c", "from kvgate.cli import main; main()", "run", "--engine", "fake"]
    argv += ["-w", str(smoke_workload), "--executor", "ray", "-o", str(tmp_path / "runs"), "--quiet"]
    env = {**os.environ, "RAY_TMPDIR": "/proc/no-such-folder"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 4, done.stderr[-300:]
    assert "kvgate: error: Ray did not start: FileNotFoundError" in done.stderr, done.stderr[-300:]


def _edit_json(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _first_part(data: dict[str, Any]) -> dict[str, Any]:
    return data["parts"][next(iter(data["parts"]))]


INDEX_FIELDS = {
    "an unknown top-level key": (lambda d: d.update(extra=1), "malformed at (top level)"),
    "no run_id": (lambda d: d.pop("run_id"), "malformed at (top level)"),
    "another run's id": (lambda d: d.update(run_id="20990101T000000.000Z-000000000000"), "belongs to run"),
    "a sha256 that is no digest": (lambda d: _first_part(d).update(sha256="xyz"), "malformed at parts/"),
    "negative rows": (lambda d: _first_part(d).update(rows=-1), "malformed at parts/"),
    "an unknown entry key": (lambda d: _first_part(d).update(note="x"), "malformed at parts/"),
    "a key outside results": (
        lambda d: d["parts"].update({"../x/part-00000.parquet": {}}),
        "malformed at parts",
    ),
}


@pytest.mark.parametrize("field", sorted(INDEX_FIELDS))
@pytest.mark.parametrize("command", ["report", "run --resume"])
def test_every_index_field_is_checked(tmp_path: Path, finished_run: Path, field: str, command: str) -> None:
    """Some index fields were never checked on read (its run id, an entry's other keys, a digest's form)."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    edit, message = INDEX_FIELDS[field]
    _edit_json(run_dir / "results" / "index.json", edit)
    args = ["report", str(run_dir)] if command == "report" else ["run", "--resume", str(run_dir), "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("declared", [b"5", b"99", b"two", b""])
def test_a_part_of_an_unknown_result_version_is_refused(
    tmp_path: Path, finished_run: Path, declared: bytes
) -> None:
    """A part declaring an unknown row version was read as version 2."""
    import pyarrow.parquet as pq

    from kvgate.rundir.part_index import entry, read_index, write_index
    from kvgate.rundir.result_part import RESULT_VERSION_KEY

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    results = run_dir / "results"
    part = next(results.glob("*/part-*.parquet"))
    table = pq.read_table(part)
    pq.write_table(
        table.replace_schema_metadata({**table.schema.metadata, RESULT_VERSION_KEY: declared}), part
    )
    parts = read_index(results)  # listed again with its new checksum: only the version is wrong
    parts[part.relative_to(results).as_posix()] = entry(part, table.num_rows)
    write_index(results, json.loads((run_dir / "manifest.json").read_text())["run_id"], parts)
    result = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert "declares result schema version" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("version", ["0.0.9", "9.9.9"])
def test_resuming_a_run_of_another_kvgate_version_is_refused(
    tmp_path: Path, finished_run: Path, version: str
) -> None:
    """A run made by another kvgate version was resumed silently (its formats may differ)."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    _edit_json(run_dir / "manifest.json", lambda m: m.update(kvgate_version=version))
    result = CliRunner().invoke(cli, ["run", "--resume", str(run_dir), "--quiet"])
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert f"it was made by kvgate '{version}'" in result.stderr and result.stderr.count("\n") == 1


FORGED = {
    "n_prompt_tokens not its ids' count": lambda c: {"n_prompt_tokens": (c.n_prompt_tokens or 0) + 1},
    "a negative token id": lambda c: {"prompt_token_ids": (-5, *(c.prompt_token_ids or ())[1:])},
    "question_start past the prompt": lambda c: {"question_start": (c.n_prompt_tokens or 0) + 10},
    "no messages": lambda c: {"messages": ()},
    "a message without a role": lambda c: {"messages": ({"content": "hi"},)},
}


@pytest.mark.parametrize("forgery", sorted(FORGED))
def test_forged_workload_values_are_refused_at_read_as_at_write(
    tmp_path: Path, smoke_workload: Path, forgery: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload rewritten with values the schema forbids and its content sha256 recomputed was partly
    accepted; `write_workload` refuses the same values."""
    import dataclasses

    from kvgate.errors import BadInput
    from kvgate.workload import schema

    cases = list(schema.read_workload(smoke_workload).cases)
    cases[0] = dataclasses.replace(cases[0], **FORGED[forgery](cases[0]))
    with pytest.raises(BadInput):
        schema.write_workload(cases, tmp_path / "refused.parquet", {"tokenizer": "words", "suites": {}})
    original = schema.read_workload(smoke_workload)
    monkeypatch.setattr(schema, "check_cases", lambda cases, where: None)  # the forger's own writer
    schema.write_workload(cases, tmp_path / "forged.parquet", dict(original.meta))
    monkeypatch.undo()
    result = CliRunner().invoke(cli, ["freeze", "--check", str(tmp_path / "forged.parquet")])
    assert result.exit_code == 2 and f"case {cases[0].case_id!r}" in result.stderr, result.output
