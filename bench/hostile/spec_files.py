"""Spec files and traces: policies, matrices and suites × raw mutations (encodings, depth, size, garbage)
and every field × bad values or removed; traces × mutations; each as special files and at non-UTF-8
paths; × every command that reads them (`file_commands`)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostile.case import ANY, REFUSED, Arg, Case, Prep, run_argv
from hostile.sandbox import SPECIAL_KINDS, copy, special, write

TOML_RAW: dict[str, bytes] = {
    "not-utf8": b"\xfftau = 0.1\n",
    "latin1": "tau = 0.1 # \xe9\n".encode("latin-1"),
    "utf16": "tau = 0.1\n".encode("utf-16"),
    "bom": "\ufefftau = 0.1\n".encode(),
    "nul": b"tau = 0.1\x00\n",
    "empty": b"",
    "comment-only": b"# nothing\n",
    "binary": bytes(range(256)) * 8,
    "dotted-65": ("[" + ".".join(["a"] * 65) + "]\nx = 1\n").encode(),
    "dotted-5000": ("[" + ".".join(["a"] * 5000) + "]\nx = 1\n").encode(),
    "array-5000": ("x = " + "[" * 5000 + "]" * 5000 + "\n").encode(),
    "inline-5000": ("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n").encode(),
    "20MB-comment": b"#" + b"x" * 20_000_000 + b"\n",
    "20MB-string": b'x = "' + b"y" * 20_000_000 + b'"\n',
    "int-400-digits": b"x = " + b"9" * 400 + b"\n",
    "duplicate-key": b"tau = 0.1\ntau = 0.2\n",
    "unterminated": b'x = "never ends\n',
    "long-key": b"k" * 100_000 + b" = 1\n",
    "control-chars": b'x = "\x1b[2J\x07"\n',
}
BAD_VALUES: dict[str, str] = {
    "negative": "-1",
    "zero": "0",
    "huge-int": "1" + "0" * 30,
    "float-max": "1.7e308",
    "nan": "nan",
    "inf": "inf",
    "empty-string": '""',
    "long-string": '"' + "x" * 10_000 + '"',
    "empty-array": "[]",
    "array-of-tables": "[{a = 1}]",
    "inline-table": "{a = 1}",
    "bool": "true",
    "datetime": "1979-05-27T07:32:00Z",
    "unicode": '"\u202e\u0000"'.replace("\u0000", "\\u0000"),
    "path-traversal": '"../../../outside/sentinel.txt"',
}


def file_commands(kind: str, base: Path) -> dict[str, tuple[list[Arg], list[Prep]]]:
    """How each command reads a file of `kind` (at `{root}/in/F`)."""
    f = "{root}/in/F"
    run_copy = [copy(base / "run", "run")]
    if kind == "policy":
        return {
            "simulate": (["simulate", "--policy", f, "--runs", "20", "--n", "24"], []),
            "run": (run_argv(base, "--policy", f), []),
            "report": (["report", "{root}/in/run", "--policy", f, "--policy-changed-reason", "x"], run_copy),
        }
    if kind == "matrix":
        return {
            "run": (run_argv(base, matrix=f), []),
            "run --arms": (run_argv(base, "--arms", "fp8-e4m3", matrix=f, quiet=False), []),
        }
    if kind == "suite":
        return {
            "freeze": (["freeze", f, "-o", "{root}/out/w.parquet"], []),
            "freeze --limit": (["freeze", f, "--limit", "1", "-o", "{root}/out/w.parquet"], []),
        }
    if kind == "workload":
        return {
            "freeze --check": (["freeze", "--check", f], []),
            "run": (run_argv(base, workload=f, limit=None), []),
            "simulate": (["simulate", "-w", f, "--runs", "20"], []),
        }
    if kind == "trace":
        return {
            "init": (["init", f, "-o", "{root}/out/gate"], []),
            "init --engine fake": (["init", f, "-o", "{root}/out/gate", "--engine", "fake"], []),
        }
    raise ValueError(kind)


def file_classes(base: Path) -> Iterator[Case]:
    """policy, matrix, suite, trace: raw mutations, field mutations and special files × commands."""
    valid = {
        "policy": (base / "policy.toml").read_text(),
        "matrix": (base / "small.toml").read_text(),
        "suite": (base / "suite.toml").read_text(),
    }
    for kind, text in valid.items():
        mutations: dict[str, bytes] = dict(TOML_RAW)
        parsed = tomllib.loads(text)
        for key, _value in _leaves(parsed):
            table, leaf = key.rsplit(".", 1) if "." in key else ("", key)
            for bad, literal in BAD_VALUES.items():
                if bad in ("float-max", "datetime", "array-of-tables", "bool", "inline-table", "unicode"):
                    continue
                mutations[f"{key}={bad}"] = _set_leaf(text, table, leaf, literal).encode()
            mutations[f"{key} removed"] = _set_leaf(text, table, leaf, None).encode()
        mutations["unknown key"] = (text + "\nsurprise = 1\n").encode()
        if kind == "matrix":
            for extra in [
                'candidates = ["' + '", "'.join(f"q{i}" for i in range(n)) + '"]' for n in (65, 500)
            ]:
                mutations[f"{extra[:20]}…"] = _set_leaf(
                    text, "matrix", "candidates", extra.split(" = ", 1)[1]
                ).encode()
            for section in [
                "[faults.fp8-e4m3]\nwrong_answer_rate = 2.0",
                '[faults."*"]\nwrong_answer_rate = -1',
                "[arm.fp8-e4m3]\nbatch_size = 100000000",
                "[arm.nonexistent]\nbatch_size = 1",
                "[load]\nabort_percent = 101",
                "[faults.fp8-e4m3]\nhang_s = 1e9",
            ]:
                mutations[section.split("\n")[0] + " " + section.split("\n")[1][:24]] = (
                    f"{text}\n{section}\n".encode()
                )
        if kind == "suite":
            for key, literal in [
                ("per_cell", "100000000"),
                ("lengths", "[100000000]"),
                ("lengths", "[-5]"),
                ("generator", '"nonexistent"'),
                ("depths", "[1e308]"),
                ("haystack", '"../devices/zero"'),
            ]:
                mutations[f"generate.{key}={literal[:12]}"] = _set_leaf(
                    text, "[generate]", key, literal
                ).encode()
            mutations["name traversal"] = _set_leaf(text, "", "name", '"../../outside/x"').encode()
        for command, (argv, preps) in file_commands(kind, base).items():
            for mutation, data in mutations.items():
                is_field = "=" in mutation or mutation.endswith("removed")
                if is_field and command in ("run", "freeze --limit", "run --arms") and kind != "matrix":
                    continue
                expect = ANY if is_field or "unknown" in mutation else REFUSED  # a field's value may be valid
                if mutation in ("comment-only", "empty", "bom") and kind == "policy":
                    expect = ANY  # an empty policy is the default one
                yield Case(kind, f"{mutation} via {command}", argv, [write("F", data), *preps], expect)
            yield from as_special_files(kind, command, argv, text.encode(), preps)
            yield at_non_utf8_path(kind, command, argv, text.encode(), preps, b"F\xff", {0, 1, 2, 3})
    trace_ok = (base / "trace.jsonl").read_bytes()
    traces = {
        "not-json": b"not json\n",
        "not-utf8": b'{"messages": [{"role": "user", "content": "\xff"}]}\n',
        "empty": b"",
        "no-messages": b'{"x": 1}\n',
        "messages-not-list": b'{"messages": 5}\n',
        "deep": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        "huge-line": b'{"messages": [{"role": "user", "content": "' + b"w " * 10_000_000 + b'"}]}\n',
        "nul": b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}\n',
        "role-junk": b'{"messages": [{"role": 7, "content": null}]}\n',
        "array": b"[1, 2, 3]\n",
        "many-lines": trace_ok * 20000,
    }
    for command, (argv, preps) in file_commands("trace", base).items():
        for mutation, data in traces.items():
            expect = ANY if mutation in ("many-lines", "huge-line", "nul") else REFUSED  # valid records
            yield Case("trace", f"{mutation} via {command}", argv, [write("F", data), *preps], expect)
        yield from as_special_files("trace", command, argv, trace_ok, preps)


def as_special_files(
    kind: str, command: str, argv: list[Arg], data: bytes, preps: list[Prep]
) -> Iterator[Case]:
    """`in/F` holding `data`, then made each special file (sandbox.SPECIAL_KINDS), read by `command`:
    each is refused."""
    for sp in SPECIAL_KINDS:
        prep = [write("F", data), special("F", sp), *preps]
        yield Case("special", f"{kind} as {sp} via {command}", argv, prep, REFUSED)


def at_non_utf8_path(
    kind: str, command: str, argv: list[Arg], data: bytes, preps: list[Prep], name: bytes,
    expect: set[int] = ANY,
) -> Case:  # fmt: skip
    """`data` at `in/NAME`, a name that is not UTF-8, read by `command` where it reads `in/F`."""
    path = os.fsdecode(name)
    moved = [a.replace("{root}/in/F", "{root}/in/" + path) if isinstance(a, str) else a for a in argv]
    return Case(
        "encoding", f"{kind} at a non-UTF-8 path via {command}", moved, [write(path, data), *preps], expect
    )


def _leaves(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value[:1]:
                yield from _leaves(item, f"{prefix}[{key}].")
        else:
            yield f"{prefix}{key}", value


def _set_leaf(text: str, table: str, leaf: str, literal: str | None) -> str:
    """`text` with `leaf = …` in `table` set to `literal` (removed when None): a line edit, so the rest
    of the file stays as written."""
    out, current = [], ""
    header = table.strip(".")
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            if stripped.startswith("[["):
                current = "[" + current + "]"
        key = stripped.split("=", 1)[0].strip()
        if "=" in stripped and key == leaf and current.strip("[]") == header.strip("[]"):
            if literal is None:
                continue
            line = f"{leaf} = {literal}"
        out.append(line)
    return "\n".join(out) + "\n"
