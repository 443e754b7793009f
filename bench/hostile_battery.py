"""A hostile battery: thousands of generated hostile inputs, each `kvgate …` in a child process, checked
for the promises bad input must keep (docs/hardening.md).

Cases are combinations — input class × mutation × command — not hand-written: the CLI's options × hostile
values; policies, matrices and suites × raw mutations (encodings, depth, size, garbage) and field
mutations; workloads × byte corruptions and forged columns; run directories × damage to the index,
manifest, parts and links; special files (named pipes, links to devices, loops) and non-UTF-8 paths for
every input; read-only folders (a read-only bind mount); version skew; a misbehaving OpenAI-compatible
server on loopback; secrets in endpoint URLs.

Each case runs in a fresh sandbox folder, under a 60 s cap, in a child process forked from a "zygote"
that has the tree's kvgate imported (so a case costs a fraction of kvgate's start-up) and reports the
child's peak RSS from wait4 (the ≈ 150 MiB of imports it was forked with included). A case deviates
when: it exits 70; "Traceback" is in its output; it hangs (killed at the cap); its peak RSS is over
1 GiB without a refusal (exit 2 or 4); a file outside its run directory or declared outputs changes
(the sandbox is snapshot before and after, links not followed; a link's target outside the run is a
sentinel folder; devices are the sandbox's own nodes, never /dev's); the secret appears in anything it
printed or wrote; or its exit code is not one the case's input allows (exit 2 for input that is bad).

    python bench/hostile_battery.py --tree /path/to/kvgate/checkout --label after [--classes cli,...]
        [--sample N] [--jobs 2] [--json out.json]

Inputs are made first by that tree (`bench/hostile_inputs.py`); the summary is printed as a table and
written as JSON. Needs root for the read-only cases (a bind mount); without it they are skipped.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests" / "engines" / "server"))

from stub_server import StubServer, start_stub  # noqa: E402

CAP_S = 60.0
MEMORY_KIB = 1 << 20
SECRET = "hb29-s3cr3t-T0KEN"
REFUSED = {2}
SERVED = {2, 4}
ANY = {0, 1, 2, 3, 4}
SERVER_ENV = {"KVGATE_ENGINE": "server"}
DEVICES = {"null": 3, "zero": 5, "urandom": 9}
"""Character devices made in each sandbox (Linux minor numbers of mem devices): a case names these,
never /dev itself, so a kvgate that renames a file over a device it was given (as `view -o /dev/null`
did on f684a0a) replaces the sandbox's node, not the machine's."""
Arg = str | bytes
Prep = Callable[[Path], None]


@dataclass
class Case:
    """One hostile input: `argv` after `kvgate`, run in a sandbox that `prep` fills. `{root}` in an
    argument is the sandbox; `allow` lists the sandbox paths it may write (beside runs/, out/, work/
    and kvgate's cache)."""

    cls: str
    name: str
    argv: list[Arg]
    prep: list[Prep] = field(default_factory=list)
    expect: set[int] = field(default_factory=lambda: set(ANY))
    env: dict[str, str] = field(default_factory=dict)
    allow: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    case: Case
    code: int | str
    wall_s: float
    peak_kib: int
    output: str
    outside: list[str]
    secret: list[str]

    def deviations(self) -> list[str]:
        found = []
        if self.code == 70:
            found.append("exit 70")
        if self.code == "hang":
            found.append("hang")
        if "Traceback" in self.output:
            found.append("traceback")
        if self.peak_kib > MEMORY_KIB and self.code not in SERVED:
            found.append("memory")
        if self.outside:
            found.append("outside write")
        if self.secret:
            found.append("secret")
        if not found and self.code not in self.case.expect:
            found.append("unexpected exit")
        return found


# ---------------------------------------------------------------- sandbox helpers


def copy(src: Path, name: str) -> Prep:
    def prep(root: Path) -> None:
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / "in" / name, symlinks=True)

    return prep


def write(name: str, data: bytes) -> Prep:
    def prep(root: Path) -> None:
        path = root / "in" / os.fsdecode(name.encode("utf-8", "surrogateescape"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return prep


def special(name: str, kind: str) -> Prep:
    """`in/NAME` made a special file: a named pipe, a link to a device, a folder, a dangling link, a
    link loop, or a link to a file outside the run (the sentinel folder)."""

    def prep(root: Path) -> None:
        path = root / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind.startswith("/dev/"):  # a link to the sandbox's own node of that device
            path.symlink_to(root / "devices" / kind.removeprefix("/dev/"))
        elif kind == "folder":
            path.mkdir()
        elif kind == "dangling":
            path.symlink_to(root / "nowhere" / "x")
        elif kind == "loop":
            path.symlink_to(path)
        elif kind == "outside-link":
            path.symlink_to(root / "outside" / "sentinel.txt")
        elif kind == "outside-dir-link":
            path.symlink_to(root / "outside")
        elif kind == "hardlink":
            os.link(root / "outside" / "sentinel.txt", path)
        else:
            raise ValueError(kind)

    return prep


def edit(name: str, change: Callable[[Path], None]) -> Prep:
    return lambda root: change(root / "in" / name)


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    seen: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(root):
        for entry in dirs + files:
            path = os.path.join(folder, entry)
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            mtime = 0 if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns  # a folder counts by what it holds
            seen[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), size, mtime, link)
    return seen


def changed(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def allowed(path: str, prefixes: list[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


# ---------------------------------------------------------------- the misbehaving servers


class RawServer:
    """A loopback TCP server answering every connection the same hostile way (`mode`)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(90)
            conn.recv(65536)
            mode = self.mode
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            if mode == "close":
                pass
            elif mode == "garbage":
                conn.sendall(random.Random(0).randbytes(4096))
            elif mode == "html-500":
                conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 19\r\n\r\n<html>broken</html>")
            elif mode == "json-list":
                conn.sendall(f"{head}Content-Length: 9\r\n\r\n[1, 2, 3]".encode())
            elif mode == "json-null":
                conn.sendall(f"{head}Content-Length: 4\r\n\r\nnull".encode())
            elif mode == "not-json":
                conn.sendall(f"{head}Content-Length: 5\r\n\r\n{{{{{{{{".encode()[:-3])
            elif mode == "endless-headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in range(10**7):
                    conn.sendall(f"X-{i}: {'a' * 1000}\r\n".encode())
            elif mode == "length-lie":
                conn.sendall(f"{head}Content-Length: 10000000000\r\n\r\n{{".encode())
                time.sleep(80)
            elif mode == "silent":
                time.sleep(80)
            elif mode == "bad-chunked":
                conn.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n".encode())
            elif mode == "redirect-loop":
                conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /v1/models\r\nContent-Length: 0\r\n\r\n")
            elif mode == "redirect-out":
                conn.sendall(
                    b"HTTP/1.1 302 Found\r\nLocation: http://10.255.255.1/\r\nContent-Length: 0\r\n\r\n"
                )
            elif mode == "http09":
                conn.sendall(b'{"data": []}')
        except OSError:
            pass
        finally:
            conn.close()


# ---------------------------------------------------------------- the generator

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
SPECIAL_KINDS = ["fifo", "/dev/zero", "/dev/urandom", "/dev/null", "folder", "dangling", "loop"]
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
ARG_VALUES: dict[str, Arg] = {
    "empty": "",
    "space": " ",
    "negative": "-1",
    "zero": "0",
    "huge-int": "99999999999999999999999",
    "billion": "1000000000",
    "nan": "nan",
    "inf": "inf",
    "hex": "0x10",
    "long": "x" * 100_000,
    "newline": "a\nb",
    "rtl": "\u202eevil",
    "not-utf8": b"x\xff\xfe",
    "equals": "=",
    "kv-junk": "a=b=c",
    "star": "*=",
    "dash": "-",
    "traversal": "../outside/sentinel.txt",
    "dev-null": "{root}/devices/null",
    "dev-zero": "{root}/devices/zero",
    "fifo": "{root}/in/fifo",
    "folder": "{root}/in/folder",
    "loop": "{root}/in/loop",
    "dangling": "{root}/in/dangling",
}


def run_args(base: Path, *extra: Arg) -> list[Arg]:
    return [
        "run",
        "--engine",
        "fake",
        "-w",
        str(base / "w.parquet"),
        "-m",
        str(base / "small.toml"),
        "--limit",
        "2",
        "--quiet",
        "-o",
        "{root}/runs",
        *extra,
    ]


def file_commands(kind: str, base: Path) -> dict[str, tuple[list[Arg], list[Prep]]]:
    """How each command reads a file of `kind` (at `{root}/in/F`)."""
    f = "{root}/in/F"
    run_copy = [copy(base / "run", "run")]
    if kind == "policy":
        return {
            "simulate": (["simulate", "--policy", f, "--runs", "20", "--n", "24"], []),
            "run": (run_args(base, "--policy", f), []),
            "report": (["report", "{root}/in/run", "--policy", f, "--policy-changed-reason", "x"], run_copy),
        }
    if kind == "matrix":
        return {
            "run": ([*run_args(base)[:5], "--limit", "2", "--quiet", "-o", "{root}/runs", "-m", f], []),
            "run --arms": (
                [*run_args(base)[:5], "--limit", "2", "-o", "{root}/runs", "-m", f, "--arms", "fp8-e4m3"],
                [],
            ),
        }
    if kind == "suite":
        return {
            "freeze": (["freeze", f, "-o", "{root}/out/w.parquet"], []),
            "freeze --limit": (["freeze", f, "--limit", "1", "-o", "{root}/out/w.parquet"], []),
        }
    if kind == "workload":
        return {
            "freeze --check": (["freeze", "--check", f], []),
            "run": (
                [
                    "run",
                    "--engine",
                    "fake",
                    "-w",
                    f,
                    "-m",
                    str(base / "small.toml"),
                    "--quiet",
                    "-o",
                    "{root}/runs",
                ],
                [],
            ),
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
            for sp in SPECIAL_KINDS:
                prep = [write("F", text.encode()), special("F", sp)]
                yield Case("special", f"{kind} as {sp} via {command}", argv, [*prep, *preps], REFUSED)
            name = os.fsdecode(b"F\xff")
            enc_argv = [
                a.replace("{root}/in/F", "{root}/in/" + name) if isinstance(a, str) else a for a in argv
            ]
            yield Case(
                "encoding",
                f"{kind} at a non-UTF-8 path via {command}",
                enc_argv,
                [write(name, text.encode()), *preps],
                {0, 1, 2, 3},
            )
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
        for sp in SPECIAL_KINDS:
            yield Case(
                "special",
                f"trace as {sp} via {command}",
                argv,
                [write("F", trace_ok), special("F", sp), *preps],
                REFUSED,
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


def workload_class(base: Path) -> Iterator[Case]:
    data = (base / "w.parquet").read_bytes()
    n = len(data)
    mutations: dict[str, bytes] = {
        f"truncated to {k}": data[:k] for k in (0, 1, 4, 8, n // 4, n // 2, n - 8, n - 1)
    }
    for i in range(28):
        at = (i * 7919) % n if i < 20 else n - 1 - (i - 20)
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        mutations[f"byte {at} flipped"] = bytes(flipped)
    mutations["garbage"] = random.Random(1).randbytes(n)
    mutations["doubled"] = data + data
    for path in sorted((base / "forged").iterdir()):
        mutations[f"forged {path.stem}"] = path.read_bytes()
    for command, (argv, preps) in file_commands("workload", base).items():
        for mutation, raw in mutations.items():
            if command == "simulate" and (mutation.startswith("forged") or mutation.startswith("byte")):
                continue
            expect = ANY if mutation in ("forged twice", "doubled") else REFUSED  # doubled: the footer reads
            if mutation.startswith("byte") or mutation.startswith("forged"):
                expect = ANY  # a flipped byte in a string, a forgery freeze accepts: the hash says
            yield Case("workload", f"{mutation} via {command}", argv, [write("F", raw), *preps], expect)
        for sp in SPECIAL_KINDS:
            yield Case(
                "special",
                f"workload as {sp} via {command}",
                argv,
                [write("F", data), special("F", sp), *preps],
                REFUSED,
            )
        name = os.fsdecode(b"W\xff.parquet")
        enc = [a.replace("{root}/in/F", "{root}/in/" + name) if isinstance(a, str) else a for a in argv]
        yield Case(
            "encoding", f"workload at a non-UTF-8 path via {command}", enc, [write(name, data), *preps]
        )


RUN_COMMANDS: dict[str, tuple[list[Arg], list[str]]] = {
    "report": (["report", "{root}/in/run"], []),
    "report json -o": (["report", "{root}/in/run", "--format", "json", "-o", "{root}/out/r.json"], []),
    "resume": (["run", "--resume", "{root}/in/run", "--quiet"], ["in/run"]),
    "view": (["view", "{root}/in/run", "--no-open", "-o", "{root}/out/r.html"], []),
    "runs": (["runs", "{root}/in", "--json"], []),
}


def _json_edit(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def rundir_class(base: Path) -> Iterator[Case]:
    """Run directories: the index, the manifest, parts, the lock and the engine log, damaged."""
    run = base / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    index = json.loads((run / "results" / "index.json").read_text())
    part = sorted(index["parts"])[0]
    damage: dict[str, tuple[list[Prep], set[int]]] = {}
    raw_json = {
        "not-utf8": b'{"\xff": 1}',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "empty": b"",
        "null": b"null",
        "list": b"[]",
        "nan": b'{"x": NaN}',
        "huge-number": b'{"x": 1' + b"0" * 5000 + b"}",
        "20MB": b'{"x": "' + b"y" * 20_000_000 + b'"}',
        "70MB": b'{"x": "' + b"y" * 70_000_000 + b'"}',
        "duplicate keys": b'{"run_id": "a", "run_id": "b"}',
        "truncated": b'{"run_id": "',
    }
    for target in ("results/index.json", "manifest.json"):
        for mutation, raw in raw_json.items():
            damage[f"{target} {mutation}"] = ([write(f"run/{target}", raw)], REFUSED)
        for sp in [*SPECIAL_KINDS, "outside-link"]:
            damage[f"{target} as {sp}"] = ([special(f"run/{target}", sp)], REFUSED)
    bad_json_values: dict[str, Any] = {
        "null": None,
        "int": 7,
        "string": "x" * 100,
        "list": [1],
        "dict": {},
        "negative": -1,
        "huge": 10**30,
        "traversal": "../../outside/sentinel.txt",
    }
    for number, key in enumerate(manifest):
        for label in random.Random(number).sample(sorted(bad_json_values), 3):
            value = bad_json_values[label]
            damage[f"manifest {key}={label}"] = (
                [edit("run/manifest.json", lambda p, k=key, v=value: _json_edit(p, lambda m: {**m, k: v}))],
                ANY,
            )
        damage[f"manifest {key} removed"] = (
            [
                edit(
                    "run/manifest.json",
                    lambda p, k=key: _json_edit(p, lambda m: {x: y for x, y in m.items() if x != k}),
                )
            ],
            ANY,
        )
    index_edits: dict[str, Callable[[Any], Any]] = {
        "run_id other": lambda i: {**i, "run_id": "other"},
        "run_id removed": lambda i: {"parts": i["parts"]},
        "parts null": lambda i: {**i, "parts": None},
        "parts list": lambda i: {**i, "parts": [1]},
        "parts empty": lambda i: {**i, "parts": {}},
        "part traversal": lambda i: {
            **i,
            "parts": {"../../outside/sentinel.txt": {"sha256": "0" * 64, "rows": 1}},
        },
        "sha256 wrong": lambda i: {
            **i,
            "parts": {k: {**v, "sha256": "0" * 64} for k, v in i["parts"].items()},
        },
        "sha256 int": lambda i: {**i, "parts": {k: {**v, "sha256": 5} for k, v in i["parts"].items()}},
        "rows negative": lambda i: {**i, "parts": {k: {**v, "rows": -1} for k, v in i["parts"].items()}},
        "rows huge": lambda i: {**i, "parts": {k: {**v, "rows": 10**30} for k, v in i["parts"].items()}},
        "rows string": lambda i: {**i, "parts": {k: {**v, "rows": "4"} for k, v in i["parts"].items()}},
        "rows float": lambda i: {**i, "parts": {k: {**v, "rows": 4.0} for k, v in i["parts"].items()}},
        "entry null": lambda i: {**i, "parts": {k: None for k in i["parts"]}},
        "extra field": lambda i: {**i, "surprise": 1},
        "many parts": lambda i: {
            **i,
            "parts": {f"full/part-{n:05d}.parquet": {"sha256": "0" * 64, "rows": 1} for n in range(100_000)},
        },
    }
    for label, change in index_edits.items():
        damage[f"index {label}"] = (
            [edit("run/results/index.json", lambda p, c=change: _json_edit(p, c))],
            REFUSED,
        )

    def absolute_part(root: Path) -> None:  # an index naming a file by absolute path, in the sandbox
        index = root / "in" / "run" / "results" / "index.json"
        absolute = str(root / "outside" / "sentinel.txt")
        _json_edit(index, lambda i: {**i, "parts": {absolute: {"sha256": "0" * 64, "rows": 1}}})

    damage["index part absolute"] = ([absolute_part], REFUSED)

    def part_bytes(change: Callable[[bytes], bytes]) -> Prep:
        return edit(f"run/results/{part}", lambda p: p.write_bytes(change(p.read_bytes())))

    damage |= {
        "results removed": ([edit("run/results", shutil.rmtree)], REFUSED),
        "results a file": ([edit("run/results", shutil.rmtree), write("run/results", b"x")], REFUSED),
        "results as fifo": ([special("run/results", "fifo")], REFUSED),
        "results link outside": ([special("run/results", "outside-dir-link")], REFUSED),
        "part truncated": ([part_bytes(lambda b: b[: len(b) // 2])], REFUSED),
        "part emptied": ([part_bytes(lambda b: b"")], REFUSED),
        "part garbage": ([part_bytes(lambda b: random.Random(2).randbytes(len(b)))], REFUSED),
        "part removed": ([edit(f"run/results/{part}", Path.unlink)], REFUSED),
        "part extra": (
            [edit(f"run/results/{part}", lambda p: shutil.copy(p, p.with_name("part-09999.parquet")))],
            REFUSED,
        ),
        "arm folder extra": (
            [edit("run/results", lambda p: shutil.copytree(p / part.split("/")[0], p / "intruder"))],
            REFUSED,
        ),
        "manifest removed": ([edit("run/manifest.json", Path.unlink)], REFUSED),
        "lock as fifo": ([special("run/.lock", "fifo")], ANY),
        "lock as folder": ([special("run/.lock", "folder")], ANY),
        "lock link outside": ([special("run/.lock", "outside-link")], ANY),
        "engine.log link outside": ([special("run/engine.log", "outside-link")], ANY),
        "engine.log hard link outside": ([special("run/engine.log", "hardlink")], ANY),
        "engine.log as fifo": ([special("run/engine.log", "fifo")], ANY),
        "engine.log as folder": ([special("run/engine.log", "folder")], ANY),
        "server link outside": ([special("run/server", "outside-dir-link")], ANY),
        "report.html link outside": ([special("run/report.html", "outside-link")], ANY),
        "run folder not utf8 name": (
            [edit("run", lambda p: os.symlink(p, p.parent / os.fsdecode(b"r\xff")))],
            ANY,
        ),
    }
    for sp in [*SPECIAL_KINDS, "outside-link", "hardlink"]:
        damage[f"part as {sp}"] = ([special(f"run/results/{part}", sp)], REFUSED)
    for command, (argv, allow) in RUN_COMMANDS.items():
        for mutation, (preps, expect) in damage.items():
            if command in ("runs", "report json -o") and mutation.startswith("manifest "):
                continue
            exp = ANY if command == "runs" else expect
            # what a crash leaves (a part unlisted or gone, no index) a resume repairs: any exit but 70
            repaired = (
                "results removed",
                "part removed",
                "index parts empty",
                "results/index.json as dangling",
            )
            if command == "resume" and mutation in repaired:
                exp = ANY
            yield Case(
                "rundir", f"{mutation} via {command}", argv, [copy(run, "run"), *preps], exp, allow=allow
            )


def version_class(base: Path) -> Iterator[Case]:
    run = base / "run"
    versions = ["0.0.1", "0.1.1", "1.0.0", "99.0.0", "0.1.0.dev0", "", "x" * 300, "0.1.0\n", "0.1.0+evil"]
    for command, (argv, allow) in RUN_COMMANDS.items():
        for v in versions:
            prep = edit(
                "run/manifest.json", lambda p, v=v: _json_edit(p, lambda m: {**m, "kvgate_version": v})
            )
            expect = ANY if command in ("runs", "report", "report json -o", "view") else REFUSED
            yield Case(
                "version",
                f"kvgate_version {v[:12]!r} via {command}",
                argv,
                [copy(run, "run"), prep],
                expect,
                allow=allow,
            )
        for folder in sorted((base / "versions").iterdir()):
            expect = ANY if command == "runs" else REFUSED
            if (
                folder.name in ("part-version-none", "part-version-3", "part-version-1")
                or "forged" in folder.name
            ):
                expect = ANY  # an older version is upgraded on read; forged values get their verdicts
            yield Case(
                "version", f"{folder.name} via {command}", argv, [copy(folder, "run")], expect, allow=allow
            )
        for key, value in [("schema_version", 99), ("result_schema_version", 99), ("format", "v99")]:
            prep = edit("run/manifest.json", lambda p, k=key, v=value: _json_edit(p, lambda m: {**m, k: v}))
            yield Case(
                "version",
                f"manifest {key}={value} via {command}",
                argv,
                [copy(run, "run"), prep],
                ANY,
                allow=allow,
            )


OPTIONS: dict[str, tuple[list[Arg], str, list[Prep]]] = {}


def cli_class(base: Path) -> Iterator[Case]:
    """Every option of every command × hostile values."""
    run = copy(base / "run", "run")
    runb = [
        "--engine",
        "fake",
        "-w",
        str(base / "w.parquet"),
        "-m",
        str(base / "small.toml"),
        "--limit",
        "2",
        "-o",
        "{root}/runs",
        "--quiet",
    ]
    options: list[tuple[str, Callable[[Arg], list[Arg]], list[Prep]]] = [
        ("run -w", lambda v: ["run", *runb, "-w", v], []),
        ("run -m", lambda v: ["run", *runb, "-m", v], []),
        ("run --arms", lambda v: ["run", *runb, "--arms", v], []),
        ("run --engine", lambda v: ["run", *runb, "--engine", v], []),
        ("run --model", lambda v: ["run", *runb, "--model", v], []),
        ("run --policy", lambda v: ["run", *runb, "--policy", v], []),
        ("run --tau", lambda v: ["run", *runb, "--tau", v], []),
        ("run --critical", lambda v: ["run", *runb, "--critical", v], []),
        ("run --policy-unsafe-reason", lambda v: ["run", *runb, "--policy-unsafe-reason", v], []),
        ("run -o", lambda v: ["run", *runb, "-o", v], []),
        ("run --run-dir", lambda v: ["run", *runb, "--run-dir", v], []),
        ("run --resume", lambda v: ["run", "--resume", v, "--quiet"], []),
        (
            "run --resume RUN with",
            lambda v: ["run", "--resume", "{root}/in/run", "--limit", v, "--quiet"],
            [run],
        ),
        ("run --limit", lambda v: ["run", *runb, "--limit", v], []),
        ("run -E", lambda v: ["run", *runb, "-E", v], []),
        (
            "run -E timeout_s",
            lambda v: ["run", *runb, "-E", f"timeout_s={os.fsdecode(v) if isinstance(v, bytes) else v}"],
            [],
        ),
        ("run --endpoint", lambda v: ["run", *runb, "--endpoint", v], []),
        ("run --executor", lambda v: ["run", *runb, "--executor", v], []),
        ("run --ray-workers", lambda v: ["run", *runb, "--executor", "ray", "--ray-workers", v], []),
        ("report RUN_DIR", lambda v: ["report", v], []),
        (
            "report --format",
            lambda v: ["report", "{root}/in/run", "--format", v, "-o", "{root}/out/r"],
            [run],
        ),
        ("report -o", lambda v: ["report", "{root}/in/run", "-o", v], [run]),
        (
            "report --policy",
            lambda v: ["report", "{root}/in/run", "--policy", v, "--policy-changed-reason", "x"],
            [run],
        ),
        (
            "report --policy-changed-reason",
            lambda v: [
                "report",
                "{root}/in/run",
                "--policy",
                str(base / "policy.toml"),
                "--policy-changed-reason",
                v,
            ],
            [run],
        ),
        ("report --compare", lambda v: ["report", "{root}/in/run", "--compare", v], [run]),
        (
            "report --junit-inconclusive",
            lambda v: ["report", "{root}/in/run", "--format", "junit", "--junit-inconclusive", v],
            [run],
        ),
        ("report --samples", lambda v: ["report", "{root}/in/run", "--samples", v], [run]),
        ("freeze SUITE", lambda v: ["freeze", v, "-o", "{root}/out/w.parquet"], []),
        ("freeze -o", lambda v: ["freeze", str(base / "suite.toml"), "-o", v], []),
        (
            "freeze --model",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--model", v],
            [],
        ),
        (
            "freeze --seed",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--seed", v],
            [],
        ),
        (
            "freeze --limit",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--limit", v],
            [],
        ),
        ("freeze --check", lambda v: ["freeze", "--check", v], []),
        ("simulate --policy", lambda v: ["simulate", "--runs", "20", "--n", "24", "--policy", v], []),
        ("simulate -w", lambda v: ["simulate", "--runs", "20", "-w", v], []),
        ("simulate --n", lambda v: ["simulate", "--runs", "20", "--n", v], []),
        ("simulate --runs", lambda v: ["simulate", "--n", "24", "--runs", v], []),
        ("simulate --seed", lambda v: ["simulate", "--runs", "20", "--n", "24", "--seed", v], []),
        (
            "simulate --control-pass-rate",
            lambda v: ["simulate", "--runs", "20", "--n", "24", "--control-pass-rate", v],
            [],
        ),
        ("simulate --aa-rate", lambda v: ["simulate", "--runs", "20", "--n", "24", "--aa-rate", v], []),
        (
            "simulate --defects-in",
            lambda v: ["simulate", "--runs", "20", "-w", str(base / "w.parquet"), "--defects-in", v],
            [],
        ),
        ("init TRACE", lambda v: ["init", v, "-o", "{root}/out/gate"], []),
        ("init -o", lambda v: ["init", str(base / "trace.jsonl"), "-o", v], []),
        (
            "init --engine",
            lambda v: ["init", str(base / "trace.jsonl"), "-o", "{root}/out/gate", "--engine", v],
            [],
        ),
        ("runs RUNS_DIR", lambda v: ["runs", v], []),
        ("view RUN_DIR", lambda v: ["view", v, "--no-open", "-o", "{root}/out/r.html"], []),
        ("view -o", lambda v: ["view", "{root}/in/run", "--no-open", "-o", v], [run]),
        (
            "view --port",
            lambda v: ["view", "{root}/in/run", "--no-open", "--port", v, "-o", "{root}/out/r.html"],
            [run],
        ),
    ]
    fixtures = [
        special("fifo", "fifo"),
        special("folder", "folder"),
        special("loop", "loop"),
        special("dangling", "dangling"),
    ]
    always = ["not-utf8", "long", "newline", "fifo", "traversal", "empty", "huge-int", "negative"]
    for number, (option, make, preps) in enumerate(options):
        rest = random.Random(number).sample(sorted(set(ARG_VALUES) - set(always)), 6)
        for label in always + rest:
            value = ARG_VALUES[label]
            argv = make(value)
            writes_output = any(option.endswith(o) for o in (" -o", "--run-dir", "--samples"))
            # an output path the user names is theirs to write (the traversal's target, an empty folder,
            # the target of a dangling link); replacing a named pipe with a file still counts
            allow = ["outside/sentinel.txt", "in/folder", "nowhere"] if writes_output else []
            allow += ["in/run"] if "resume" in option else []
            yield Case("cli", f"{option} {label}", argv, [*fixtures, *preps], ANY, allow=allow)


def readonly_class(base: Path, ro: Path | None) -> Iterator[Case]:
    """Folders kvgate cannot write: a read-only bind mount holding a run, a workload and empty folders."""
    if ro is None:
        return
    w = str(base / "w.parquet")
    runb = ["--engine", "fake", "-w", w, "-m", str(base / "small.toml"), "--limit", "2", "--quiet"]
    cases: dict[str, tuple[list[Arg], set[int], dict[str, str]]] = {
        "run -o ro": (["run", *runb, "-o", f"{ro}/runs"], REFUSED, {}),
        "run -o ro/new/deeper": (["run", *runb, "-o", f"{ro}/new/deeper"], REFUSED, {}),
        "run --run-dir ro/empty": (["run", *runb, "--run-dir", f"{ro}/empty"], REFUSED, {}),
        "run --run-dir ro/new": (["run", *runb, "--run-dir", f"{ro}/new"], REFUSED, {}),
        "run --resume ro/run": (["run", "--resume", f"{ro}/run", "--quiet"], {0, 1, 2, 3}, {}),
        "run --resume ro/partial": (["run", "--resume", f"{ro}/partial", "--quiet"], REFUSED, {}),
        "report ro/run": (["report", f"{ro}/run"], {0, 1, 3}, {}),
        "report ro/run -o ro": (["report", f"{ro}/run", "-o", f"{ro}/r.md", "--format", "md"], REFUSED, {}),
        "report ro/run --samples ro": (["report", f"{ro}/run", "--samples", f"{ro}/s.jsonl"], REFUSED, {}),
        "report ro/run multi -o ro": (
            ["report", f"{ro}/run", "--format", "md,json", "-o", f"{ro}/dir"],
            REFUSED,
            {},
        ),
        "view ro/run": (["view", f"{ro}/run", "--no-open"], REFUSED, {}),
        "freeze -o ro": (["freeze", str(base / "suite.toml"), "-o", f"{ro}/w.parquet"], REFUSED, {}),
        "init -o ro": (["init", str(base / "trace.jsonl"), "-o", f"{ro}/gate"], REFUSED, {}),
        "run with TMPDIR ro": (["run", *runb, "-o", "{root}/runs"], ANY, {"TMPDIR": str(ro)}),
        "run with HOME ro": (
            ["run", *runb, "-o", "{root}/runs"],
            ANY,
            {"HOME": str(ro), "XDG_CACHE_HOME": str(ro)},
        ),
        "run with KVGATE_RUNS ro": (["run", *runb], REFUSED, {"KVGATE_RUNS": f"{ro}/runs"}),
        "run with KVGATE_CACHE ro": (
            ["run", *runb, "-o", "{root}/runs"],
            ANY,
            {"KVGATE_CACHE": f"{ro}/cache"},
        ),
        "report ro/run with TMPDIR ro": (
            ["report", f"{ro}/run", "-o", "{root}/out/r.md"],
            {0, 1, 3},
            {"TMPDIR": str(ro)},
        ),
        "simulate with TMPDIR ro": (["simulate", "--runs", "20", "--n", "24"], {0}, {"TMPDIR": str(ro)}),
        "freeze --check ro/w": (["freeze", "--check", f"{ro}/w.parquet"], {0}, {}),
    }
    for name, (argv, expect, env) in cases.items():
        variants: dict[str, list[Arg]] = {"": []}
        if argv[0] in ("run", "report"):
            variants[" (json)"] = ["--json"] if argv[0] == "run" else ["--format", "json"]
        for label, extra in variants.items():
            yield Case(
                "readonly",
                name + label,
                [a for a in argv if a != "--quiet" or not extra] + extra,
                [],
                expect,
                env,
            )
        yield Case("readonly", name + " (cwd ro)", argv, [], expect, {**env, "_CWD": str(ro)})


def server_class(base: Path, servers: dict[str, str]) -> Iterator[Case]:
    """A misbehaving OpenAI-compatible server on loopback (stub faults and raw protocol abuse)."""
    ws, model = str(base / "ws.parquet"), str(base / "stub-model")
    for mode, url in servers.items():
        for variant, extra in [
            ("timeout 2", ["-E", "timeout_s=2"]),
            ("timeout 1 limit 1", ["-E", "timeout_s=1", "--limit", "1"]),
            ("default timeout", ["--limit", "1"]),
        ]:
            if variant == "default timeout" and mode in ("trickle", "trickle-models", "silent", "length-lie"):
                extra = ["-E", "timeout_s=5", "--limit", "1"]
            argv = [
                "run",
                "-w",
                ws,
                "-m",
                str(base / "small.toml"),
                "--model",
                model,
                "--endpoint",
                f"*={url}",
                *extra,
                "-o",
                "{root}/runs",
                "--quiet",
            ]
            expect = (
                {0, 1, 3, 4} if mode in ("ok", "flaky-reset", "flaky-503", "slow", "malformed") else SERVED
            )
            yield Case("server", f"{mode} ({variant})", argv, [], expect, dict(SERVER_ENV))
    for url in [
        "ftp://127.0.0.1:9",
        "http://",
        "http:///v1",
        "http://127.0.0.1:99999",
        "http://[::1",
        "file:///etc/passwd",
        "http://127.0.0.1:1/",
        "unix:///tmp/x",
        "http://0.0.0.0:0",
        "http://" + "a" * 300 + ":80",
    ]:
        argv = [
            "run",
            "-w",
            ws,
            "--model",
            model,
            "--endpoint",
            f"*={url}",
            "-E",
            "timeout_s=2",
            "--limit",
            "1",
            "-o",
            "{root}/runs",
        ]
        yield Case("server", f"endpoint {url[:40]}", argv, [], SERVED, dict(SERVER_ENV))


def secret_class(base: Path, servers: dict[str, str]) -> Iterator[Case]:
    ws, model = str(base / "ws.parquet"), str(base / "stub-model")
    host = servers["ok"].removeprefix("http://")
    forms = [
        f"https://user:{SECRET}@{host}",
        f"http://{SECRET}@{host}",
        f"http://u:{SECRET}@{host}/v1",
        f"http://{host}/?token={SECRET}",
        f"http://{host}/v1?api_key={SECRET}",
        f"http://{host}/v1#{SECRET}",
        f"http://{host}/v1?x=1&token={SECRET}",
        f"http://user:{SECRET}@127.0.0.1:9",
        f"fp8-e4m3=http://u:{SECRET}@{host}",
    ]
    for form in forms:
        endpoint = form if form.startswith("fp8") else f"*={form}"
        for variant, extra in [
            ("run", []),
            ("run --json", ["--json"]),
            ("run --arms", ["--arms", "fp8-e4m3"]),
        ]:
            argv = [
                "run",
                "-w",
                ws,
                "-m",
                str(base / "small.toml"),
                "--model",
                model,
                "--endpoint",
                endpoint,
                "-E",
                "timeout_s=2",
                "--limit",
                "1",
                "-o",
                "{root}/runs",
                *extra,
            ]
            yield Case(
                "secret",
                f"{form.replace(SECRET, 'SECRET')[:50]} ({variant})",
                argv,
                [],
                REFUSED,
                dict(SERVER_ENV),
            )
    for variant, extra in [
        ("env token", []),
        ("env token --json", ["--json"]),
        ("env token verbose", ["--verbose"]),
    ]:
        argv = [
            "run",
            "-w",
            ws,
            "-m",
            str(base / "small.toml"),
            "--model",
            model,
            "--endpoint",
            f"*={servers['ok']}",
            "-E",
            "timeout_s=2",
            "--limit",
            "1",
            "-o",
            "{root}/runs",
            *extra,
        ]
        yield Case("secret", variant, argv, [], {0, 1, 3, 4}, {"KVGATE_ENDPOINT_TOKEN": SECRET, **SERVER_ENV})
        yield Case(
            "secret",
            variant + " (closed port)",
            [*argv[:9], "*=http://127.0.0.1:9", *argv[10:]],
            [],
            SERVED,
            {"KVGATE_ENDPOINT_TOKEN": SECRET, **SERVER_ENV},
        )
    yield Case(
        "secret",
        "-E with a secret value",
        ["run", *run_args(base)[1:], "-E", f"api_key={SECRET}"],
        [],
        REFUSED,
    )


def size_class(base: Path) -> Iterator[Case]:
    runb = ["--engine", "fake", "-w", str(base / "w.parquet"), "--limit", "2", "-o", "{root}/runs", "--quiet"]
    for n in (65, 500, 10_000, 100_000):
        names = ", ".join(f'"q{i}"' for i in range(n))
        for via in ("-m", "--arms"):
            argv: list[Arg] = ["run", *runb, "-m", "{root}/in/m.toml"]
            if via == "--arms":
                argv += ["--arms", ",".join(f"q{i}" for i in range(min(n, 2000)))]
            data = f'[matrix]\ncontrol = "full"\ncandidates = [{names}]\n'.encode()
            yield Case("size", f"{n} candidates via {via}", argv, [write("m.toml", data)], REFUSED)
    for n in ("1000000000", "10000000", "100000"):
        yield Case(
            "size",
            f"simulate --runs {n}",
            ["simulate", "--n", "24", "--runs", n],
            [],
            REFUSED if len(n) > 9 else ANY,
        )
        yield Case("size", f"simulate --n {n}", ["simulate", "--runs", "20", "--n", n], [], ANY)
        yield Case(
            "size",
            "simulate 40 --n",
            ["simulate", "--runs", "20", *[a for _ in range(40) for a in ["--n", "24"]]][: 3 + 80],
            [],
            ANY,
        )
        yield Case("size", f"run --limit {n}", ["run", *runb, "--limit", n], [], ANY)
        yield Case(
            "size",
            f"freeze --limit {n}",
            ["freeze", str(base / "suite.toml"), "--limit", n, "-o", "{root}/out/w.parquet"],
            [],
            ANY,
        )
    many = [a for i in range(2000) for a in ["-E", f"k{i}=1"]]
    yield Case("size", "2000 -E options", ["run", *runb, *many], [], REFUSED)
    crit = [a for i in range(2000) for a in ["--critical", f"task=t{i}"]]
    yield Case("size", "2000 --critical", ["run", *runb, *crit], [], REFUSED)
    yield Case(
        "size",
        "10000 suites to freeze",
        ["freeze", *[str(base / "suite.toml")] * 10000, "-o", "{root}/out/w.parquet"],
        [],
        ANY,
    )


def all_cases(base: Path, ro: Path | None, servers: dict[str, str]) -> list[Case]:
    cases = [
        *cli_class(base),
        *file_classes(base),
        *workload_class(base),
        *rundir_class(base),
        *version_class(base),
        *readonly_class(base, ro),
        *server_class(base, servers),
        *secret_class(base, servers),
        *size_class(base),
    ]
    return cases


# ---------------------------------------------------------------- running one case

ZYGOTE = r"""
import json, os, sys, tempfile, traceback
requests, replies = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0); os.dup2(2, 1)
import kvgate.cli, kvgate.cli.run, kvgate.cli.report, kvgate.runner.job, kvgate.engines.fake
import kvgate.validators.registry, pyarrow.dataset, pyarrow.parquet, jsonschema
from kvgate.cli import main
for line in requests:
    job = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            requests.close(); replies.close()
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1); os.dup2(log, 2); os.close(log)
            os.chdir(job["cwd"])
            os.environ.clear(); os.environ.update(job["env"])
            tempfile.tempdir = None
            sys.argv = ["kvgate", *job["argv"]]
            main()
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)
    replies.write(f"pid {pid}\n"); replies.flush()
    _, status, usage = os.wait4(pid, 0)
    replies.write(f"done {os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\n"); replies.flush()
"""
"""A process with the tree's kvgate imported that forks one child per case: `kvgate ARGV…` then starts
in a fraction of the seconds its imports take (on 2 shared cores, 2,600 cases in under half an hour).
Each child has its own session, cwd, environment, argv and output; its peak RSS is what the kernel
reports for it (wait4), which counts the ≈ 150 MiB of imports it was forked with."""


class Zygote:
    def __init__(self, tree: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            stdin=subprocess.PIPE,
            cwd=tree,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        # cwd: `python -c` puts its folder first on sys.path, so it must be the tree under test
        self.lock = threading.Lock()

    def run(
        self, argv: list[str], cwd: str, env: dict[str, str], log: Path, cap_s: float
    ) -> tuple[int | str, int]:
        """(exit code or "hang", peak RSS in KiB) of `kvgate ARGV…`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write(json.dumps({"argv": argv, "cwd": cwd, "env": env, "log": str(log)}) + "\n")
            self.proc.stdin.flush()
            pid = int(self.proc.stdout.readline().split()[1])
            fired = threading.Event()
            timer = threading.Timer(cap_s, lambda: (fired.set(), _kill_group(pid)))
            timer.start()
            done = self.proc.stdout.readline().split()
            timer.cancel()
            hung = fired.is_set()
            _kill_group(pid)  # anything it left behind
        code: int | str = "hang" if hung else int(done[1])
        return code, int(done[2])

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _kill_group(pid: int) -> None:
    with __import__("contextlib").suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def expand(arg: Arg, root: Path) -> Arg:
    if isinstance(arg, bytes):
        return arg
    return arg.replace("{root}", str(root))


def run_case(case: Case, root: Path, tree: Path, zygote: Zygote, log: Path) -> Outcome:
    for sub in ("in", "runs", "out", "work", "tmp", "home", "outside", "devices"):
        (root / sub).mkdir(parents=True)
    for name, minor in DEVICES.items():  # never the machine's own: kvgate must not replace those
        os.mknod(root / "devices" / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    (root / "outside" / "sentinel.txt").write_text("outside the run\n")
    for prep in case.prep:
        prep(root)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(tree),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "XDG_CACHE_HOME": str(root / "home" / ".cache"),
        "KVGATE_CACHE": str(root / "home" / "kvcache"),
        "KVGATE_ENGINE": "fake",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LANG": "C.UTF-8",
        "COLUMNS": "100",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env |= {k: v for k, v in case.env.items() if not k.startswith("_")}
    cwd = case.env.get("_CWD", str(root / "work"))
    args = [os.fsdecode(expand(a, root)) for a in case.argv]
    before = snapshot(root)
    start = time.monotonic()
    code, peak = zygote.run(args, cwd, env, log, CAP_S)
    wall = time.monotonic() - start
    with open(log, "rb") as f:
        text = f.read(4 << 20).decode("utf-8", "replace")
    after = snapshot(root)
    prefixes = ["runs", "out", "work", "home/kvcache", *case.allow]
    diff = changed(before, after)
    crash_files = [p for p in diff if p.startswith("tmp/kvgate-crash-")]  # counted as exit 70
    outside = [p for p in diff if not allowed(p, prefixes) and p not in crash_files]
    secret = [p for p in diff if p in after and after[p][0] == stat.S_IFREG and _holds(root / p)]
    if SECRET in text:
        secret.append("(output)")
    return Outcome(case, code, wall, peak, text, outside, secret)


def _holds(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return SECRET.encode() in f.read(256 << 20)
    except OSError:
        return False


# ---------------------------------------------------------------- the battery


def make_servers() -> tuple[dict[str, str], list[StubServer]]:
    stubs: list[StubServer] = []
    servers: dict[str, str] = {}
    for mode, options in {
        "ok": {},
        "trickle-models": {"misbehave": "trickle-models"},
        "trickle": {"misbehave": "trickle"},
        "endless": {"misbehave": "endless"},
        "huge-ids": {"misbehave": "huge-ids"},
        "deep": {"misbehave": "deep"},
        "flaky-reset": {"flaky": "reset"},
        "flaky-503": {"flaky": "503"},
        "slow": {"slow_share": 1.0, "slow_s": 5.0},
        "malformed": {"malformed_share": 1.0},
        "token-required": {"token": "other"},
    }.items():
        token = options.pop("token", None)
        stub = start_stub({}, **options)
        if token:
            stub.state.options.token = token
        stubs.append(stub)
        servers[mode] = stub.url
    for mode in [
        "close",
        "garbage",
        "html-500",
        "json-list",
        "json-null",
        "not-json",
        "endless-headers",
        "length-lie",
        "silent",
        "bad-chunked",
        "redirect-loop",
        "redirect-out",
        "http09",
    ]:
        servers[mode] = RawServer(mode).url
    return servers, stubs


def read_only_mount(base: Path, work: Path) -> Path | None:
    """A read-only bind mount holding a complete run, a partial one and a workload (None without root)."""
    ro = work / "ro"
    (ro / "empty").mkdir(parents=True)
    shutil.copytree(base / "run", ro / "run")
    shutil.copytree(base / "run", ro / "partial")
    shutil.rmtree(ro / "partial" / "results")
    shutil.copy(base / "w.parquet", ro / "w.parquet")
    mounted = subprocess.run(["mount", "--bind", str(ro), str(ro)], capture_output=True).returncode == 0
    if (
        mounted
        and subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode == 0
    ):
        return ro
    if mounted:
        subprocess.run(["umount", str(ro)])
    return None


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    per_class: dict[str, Counter[str]] = defaultdict(Counter)
    deviating: list[dict[str, Any]] = []
    for o in outcomes:
        c = per_class[o.case.cls]
        c["cases"] += 1
        c[f"exit {o.code}"] += 1
        found = o.deviations()
        for kind in ("traceback", "memory", "outside write", "secret", "unexpected exit"):  # exits: above
            c[kind] += kind in found
        c["peak over 1 GiB, refused"] += o.peak_kib > MEMORY_KIB and o.code in SERVED
        c["max peak MiB"] = max(c["max peak MiB"], o.peak_kib // 1024)
        if found:
            last = [line for line in o.output.strip().splitlines() if line.strip()][-1:] or [""]
            deviating.append(
                {
                    "class": o.case.cls,
                    "case": o.case.name,
                    "code": o.code,
                    "found": found,
                    "wall_s": round(o.wall_s, 1),
                    "peak_mib": o.peak_kib // 1024,
                    "outside": o.outside[:3],
                    "secret": o.secret[:3],
                    "last": last[0][:240],
                }
            )
    return {"classes": {k: dict(v) for k, v in sorted(per_class.items())}, "deviating": deviating}


def render(summary: dict[str, Any], label: str) -> str:
    cols = [
        "cases",
        "exit 0",
        "exit 1",
        "exit 2",
        "exit 3",
        "exit 4",
        "exit 70",
        "exit hang",
        "traceback",
        "memory",
        "max peak MiB",
        "outside write",
        "secret",
        "unexpected exit",
    ]
    lines = [
        f"| {label} | " + " | ".join(c.replace("exit hang", "hang") for c in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    total: Counter[str] = Counter()
    for cls, counts in summary["classes"].items():
        lines.append(f"| {cls} | " + " | ".join(str(counts.get(c, 0)) for c in cols) + " |")
        for c in cols:
            total[c] = max(total[c], counts.get(c, 0)) if c == "max peak MiB" else total[c] + counts.get(c, 0)
    lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the kvgate checkout under test")
    parser.add_argument("--label", default="battery")
    parser.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    parser.add_argument("--match", default="", help="only cases whose name holds this")
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of this many cases")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--count", action="store_true", help="print the cases per class and stop")
    args = parser.parse_args()
    os.nice(10)
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix=f"hostile-{args.label}-"))
    base = work / "base"
    env = {**os.environ, "PYTHONPATH": str(tree), "KVGATE_CACHE": str(work / "cache")}
    subprocess.run(
        [sys.executable, str(BENCH / "hostile_inputs.py"), str(base)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    servers, stubs = make_servers()
    ro = None if args.count else read_only_mount(base, work)
    if ro is not None:
        atexit.register(subprocess.run, ["umount", "-l", str(ro)], check=False)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that atexit unmounts it
    cases = all_cases(base, ro if not args.count else Path("/ro"), servers)
    if args.classes:
        cases = [c for c in cases if c.cls in args.classes.split(",")]
    if args.match:
        cases = [c for c in cases if args.match in c.name]
    if args.sample and args.sample < len(cases):
        cases = random.Random(29).sample(cases, args.sample)
    print(f"{len(cases)} cases: {dict(Counter(c.cls for c in cases))}", flush=True)
    if args.count:
        shutil.rmtree(work)
        return
    outcomes: list[Outcome] = []
    started = time.monotonic()

    zygotes = [Zygote(tree) for _ in range(args.jobs)]
    free: list[Zygote] = list(zygotes)
    free_lock = threading.Lock()

    def one(item: tuple[int, Case]) -> Outcome:
        i, case = item
        root = work / "cases" / f"{i:05d}"
        with free_lock:
            zygote = free.pop()
        try:
            outcome = run_case(case, root, tree, zygote, work / "cases" / f"{i:05d}.log")
        finally:
            with free_lock:
                free.append(zygote)
        if not outcome.deviations():
            shutil.rmtree(root, ignore_errors=True)
            (work / "cases" / f"{i:05d}.log").unlink()
        return outcome

    (work / "cases").mkdir()
    with ThreadPoolExecutor(args.jobs) as pool:
        for n, outcome in enumerate(pool.map(one, enumerate(cases)), 1):
            outcomes.append(outcome)
            if outcome.deviations():
                print(
                    f"  DEVIATION {outcome.case.cls}: {outcome.case.name}: {outcome.code} "
                    f"{outcome.deviations()} {outcome.output.strip()[-200:]!r}",
                    flush=True,
                )
            if n % 100 == 0:
                print(f"{n}/{len(cases)} in {time.monotonic() - started:.0f} s", flush=True)
    for zygote in zygotes:
        zygote.stop()
    for stub in stubs:
        stub.stop()
    summary = summarise(outcomes)
    summary |= {
        "label": args.label,
        "tree": str(tree),
        "cases": len(outcomes),
        "work": str(work),
        "wall_s": round(time.monotonic() - started),
        "argv": sys.argv,
    }
    print(render(summary, args.label))
    print(f"{len(summary['deviating'])} deviating cases; {summary['wall_s']} s; kept in {work}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
