"""Running one case: a zygote process with the tree's kvgate imported forks a child per case, under a cap
of CAP_S; the case's outcome is its exit, peak RSS, output, what it changed outside its run and where
the secret went."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from hostile.case import SECRET, Case, Outcome
from hostile.sandbox import allowed, changed, expand, make_sandbox, snapshot

CAP_S = 60.0
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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_case(case: Case, root: Path, tree: Path, zygote: Zygote, log: Path) -> Outcome:
    """Run `case` in a fresh sandbox at `root` through `zygote`, its output in `log`; what it did."""
    make_sandbox(root, case)
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
