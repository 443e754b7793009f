"""`kvgate init TRACE.jsonl`: a starter suite, matrix and policy that freeze and run as printed, for the
engine chosen (its matrix holds only arms that engine can run), never written over existing files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli


def kvgate(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def trace(folder: Path) -> Path:
    path = folder / "traces" / "support.jsonl"
    path.parent.mkdir(parents=True)
    records = [
        {"messages": [{"role": "user", "content": f"Code {i}?"}], "expected": [str(i)], "task": t}
        for i, t in enumerate(["support", "billing"] * 15)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_init_writes_a_gate_that_freezes_and_runs_as_printed(tmp_path: Path) -> None:
    source = trace(tmp_path)
    gate = tmp_path / "gate"
    code, out = kvgate("init", source, "-o", gate, "--engine", "fake")
    assert code == 0, out
    freeze, run = [line.split(": ", 1)[-1].strip() for line in out.splitlines()[1:]]
    assert freeze.startswith("kvgate freeze") and "--model" not in freeze  # the fake engine reads words
    suite = (gate / "suite.toml").read_text()
    assert 'path = "../traces/support.jsonl"' in suite and 'name = "support"' in suite
    assert json.loads((gate / "matrix.toml").read_text().split("candidates = ")[1].splitlines()[0]) == [
        "streaming-50",
        "fp8-e4m3",
    ]
    assert '["task=billing", "task=support"]' in (gate / "policy.toml").read_text()
    assert kvgate(*shlex.split(freeze)[1:])[0] == 0
    code, out = kvgate(*shlex.split(run)[1:], "--run-dir", tmp_path / "run", "--quiet")
    assert code == 3, out  # 30 requests cannot pass τ 5%: inconclusive, but run and gated


def test_init_for_vllm_leaves_out_what_vllm_cannot_run(tmp_path: Path) -> None:
    code, out = kvgate("init", trace(tmp_path), "-o", tmp_path / "g", "--engine", "vllm")
    assert code == 0 and "kvgate freeze" in out and "--model smollm2-135m" in out
    assert 'candidates = ["fp8-e4m3"]' in (tmp_path / "g" / "matrix.toml").read_text()


def test_init_never_overwrites_and_refuses_a_bad_trace(tmp_path: Path) -> None:
    source = trace(tmp_path)
    assert kvgate("init", source, "-o", tmp_path / "g")[0] == 0
    code, out = kvgate("init", source, "-o", tmp_path / "g")
    assert code == 2 and "already holds suite.toml, matrix.toml, policy.toml" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\nnot json\n')
    code, out = kvgate("init", bad, "-o", tmp_path / "h")
    assert code == 2 and "bad.jsonl:2: not valid JSON" in out and not (tmp_path / "h").exists()


RECORD = {"messages": [{"role": "user", "content": "Code 1?"}], "expected": ["1"]}


def test_a_trace_that_is_one_json_document_says_to_write_json_lines(tmp_path: Path) -> None:
    """A JSON array of records or one pretty-printed record was "not valid JSON: Expecting property name"
    or "a record must be a JSON object, got list" at line 1."""
    for name, text, shape in [
        ("array.json", json.dumps([RECORD, RECORD]), "one JSON array"),
        ("pretty.json", json.dumps(RECORD, indent=2), "one JSON object over 11 lines"),
    ]:
        path = tmp_path / name
        path.write_text(text)
        code, out = kvgate("init", path, "-o", tmp_path / name.replace(".", "-"))
        assert code == 2 and len(out.splitlines()) == 1, out
        assert f"trace {path} is {shape}, not JSON lines: write each request as one JSON object" in out, out
    two = tmp_path / "two.jsonl"
    two.write_text(json.dumps(RECORD) + "\n[1, 2]\n")  # a later line keeps its own message
    code, out = kvgate("init", two, "-o", tmp_path / "t")
    assert code == 2 and "two.jsonl:2: a record must be a JSON object, got list" in out, out


def test_a_trace_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """A trace some editors save with a UTF-8 byte-order mark was "not valid JSON: Unexpected UTF-8 BOM
    (decode using utf-8-sig)"."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(RECORD) + "\n").encode())
    code, out = kvgate("init", path, "-o", tmp_path / "g", "--engine", "fake")
    assert code == 0, out
    freeze = next(line.split(": ", 1)[-1].strip() for line in out.splitlines() if "kvgate freeze" in line)
    assert kvgate(*shlex.split(freeze)[1:])[0] == 0
