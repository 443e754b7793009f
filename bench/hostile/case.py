"""A hostile case: the `kvgate` command line a family generates, what its sandbox holds, the exits its
input allows; its outcome and the promises it broke (docs/reference.md: its opening and "Exit codes");
and the `kvgate run` command line every family starts from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MEMORY_KIB = 1 << 20
SECRET = "hb29-s3cr3t-T0KEN"
REFUSED = {2}
SERVED = {2, 4}
ANY = {0, 1, 2, 3, 4}
SERVER_ENV = {"KVGATE_ENGINE": "server"}
RUNS = "{root}/runs"
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


def run_argv(
    base: Path,
    *extra: Arg,
    workload: str = "w.parquet",
    matrix: str | None = "small.toml",
    engine: str | None = "fake",
    model: str | None = None,
    endpoint: str | None = None,
    limit: str | None = "2",
    out: str | None = RUNS,
    quiet: bool = True,
) -> list[Arg]:
    """`kvgate run` as the families start it: the fake engine on the base inputs' workload and matrix
    (a name under `base`, or a sandbox path `{root}/…`), two cases, into the sandbox's runs/ (`out`
    None: where kvgate puts runs by default); `extra` last, so a hostile value given there is the one
    the command reads."""

    def at(name: str) -> str:
        return name if name.startswith("{root}") else str(base / name)

    argv: list[Arg] = ["run"]
    argv += ["--engine", engine] if engine else []
    argv += ["-w", at(workload)]
    argv += ["-m", at(matrix)] if matrix else []
    argv += ["--model", at(model)] if model else []
    argv += ["--endpoint", endpoint] if endpoint else []
    argv += ["--limit", limit] if limit else []
    argv += ["-o", out] if out else []
    argv += [*(["--quiet"] if quiet else []), *extra]
    return argv


def served_run_argv(
    base: Path, endpoint: str, *extra: Arg, matrix: str | None = "small.toml", limit: str | None = "1",
    quiet: bool = False,
) -> list[Arg]:  # fmt: skip
    """`kvgate run` of the stub model's workload against `endpoint` (the server engine, from SERVER_ENV),
    one case, its output kept (the secret cases read it)."""
    return run_argv(
        base, *extra, workload="ws.parquet", matrix=matrix, engine=None, model="stub-model",
        endpoint=endpoint, limit=limit, quiet=quiet,
    )  # fmt: skip
