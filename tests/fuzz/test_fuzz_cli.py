"""Fuzz the CLI's options and the TOML files it reads: every bad value is one line, exit 2, and nothing
is written (no run directory, no workload file)."""

from __future__ import annotations

from pathlib import Path

from fuzz_support import FUZZ, assert_refused, fresh, tree
from helpers.cli import kvgate
from hypothesis import given, settings
from hypothesis import strategies as st

from kvgate.engines.registry import ENGINES
from kvgate.names import is_safe_name
from kvgate.treatments.spec import EVICTION_METHOD_NAMES, SCALES

LONG = "L" * 300
"""A name longer than any file name may be."""
SHIPPED_SUITES = ("smoke", "reuse", "ruler", "structured", "longbench-2wikimqa")
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
BAD_NAME = st.one_of(
    st.sampled_from(["", ".", "..", "../../up", "/abs", "a/b", "a\\\\b", "x" * 65, "-lead", "sp ace", "é"]),
    TEXT.filter(lambda s: not is_safe_name(s)),
)
NOT_INT = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)).map(repr),
    st.sampled_from(['"12"', "true", "[]", "{}", "1.5", "nan", "inf", "-inf", "9223372036854775807"]),
)
NOT_BOOL = st.sampled_from(['"yes"', "1", "0", "1.0", "[]", "{}", '"true"'])
NOT_STR = st.sampled_from(["1", "true", "[]", "{}", "1.5", "[1, 2]"])


def out_of(low: int, high: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(max_value=low - 1).map(str), st.integers(min_value=high + 1).map(str), NOT_INT
    )


def quoted(names: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return names.map(lambda s: '"' + s.replace("\\\\", "\\\\\\\\").replace('"', '\\\\"') + '"')


# --- the CLI's options -------------------------------------------------------------------------------

RUN_OPTION = st.one_of(
    st.tuples(st.just("--engine"), st.one_of(st.just(""), TEXT.filter(lambda s: s not in ENGINES))),
    st.tuples(st.just("--limit"), st.integers(max_value=0).map(str)),
    st.tuples(
        st.just("-m"), st.one_of(st.sampled_from(["", LONG]), TEXT.filter(lambda s: s.strip() != "default"))
    ),
    st.tuples(
        st.just("--model"), st.one_of(st.sampled_from(["", "  ", LONG]), TEXT.map(lambda s: "no-" + s))
    ),
    st.tuples(st.just("--policy"), TEXT.map(lambda s: f"/no/such/policy{s}.toml")),
    st.tuples(st.just("-w"), TEXT.map(lambda s: f"/no/such/workload{s}")),
    st.tuples(st.just("-o"), st.sampled_from(["/proc/kvgate", "/dev/null/runs", "/tmp/" + "n" * 300])),
    st.tuples(st.just("--resume"), TEXT.map(lambda s: f"/no/such/run{s}")),
)


@FUZZ
@given(option=RUN_OPTION, nul=st.booleans())
def test_run_options(smoke_workload: Path, tmp_path: Path, option: tuple[str, str], nul: bool) -> None:
    tmp_path = fresh(tmp_path)
    flag, value = option
    if nul:
        value += "\x00"
    out = tmp_path / "runs"
    args = {"--engine": "fake", "-w": str(smoke_workload), "-m": "default", "-o": str(out)} | {flag: value}
    before = tree(tmp_path)
    assert_refused(kvgate("run", *[x for pair in args.items() for x in pair]), option)
    assert tree(tmp_path) == before


REPORT_CASE = st.one_of(
    st.tuples(st.sampled_from(["missing", "file", "empty", "garbage", "not-utf8", "json-list"]), st.just("")),
    st.tuples(st.just("--policy"), TEXT.map(lambda s: f"/no/such/{s}")),
    st.tuples(st.just("--compare"), TEXT.map(lambda s: f"/no/such/{s}")),
)


@FUZZ
@given(case=REPORT_CASE)
def test_report_arguments(finished_run: Path, tmp_path: Path, case: tuple[str, str]) -> None:
    tmp_path = fresh(tmp_path)
    kind, value = case
    target = tmp_path / "run"
    if kind in ("--policy", "--compare"):
        result = kvgate("report", finished_run, kind, value, "--format", "json")
    else:
        if kind != "missing":
            target.mkdir(exist_ok=True)
        if kind == "file":
            target.rmdir()
            target.write_text("x")
        contents = {"garbage": b"{not json", "not-utf8": b"\xff\xfe{}", "json-list": b"[1, 2]"}
        if kind in contents:
            (target / "manifest.json").write_bytes(contents[kind])
        result = kvgate("report", target)
    assert_refused(result, case)


FREEZE_CASE = st.one_of(
    st.tuples(st.just("suite"), st.one_of(st.just(LONG), TEXT.filter(lambda s: s not in SHIPPED_SUITES))),
    st.tuples(st.just("-o"), st.sampled_from(["/proc/x.parquet", "/dev/null/x.pq", "/tmp/" + "o" * 300])),
    st.tuples(st.just("--limit"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("--model"), st.one_of(st.just(""), TEXT.map(lambda s: "no-such-" + s))),
    st.tuples(st.just("--check"), TEXT.map(lambda s: f"/no/such/{s}")),
)


@FUZZ
@given(case=FREEZE_CASE)
def test_freeze_arguments(tmp_path: Path, case: tuple[str, str]) -> None:
    tmp_path = fresh(tmp_path)
    kind, value = case
    out = tmp_path / "w.parquet"
    if kind == "suite":
        args = ["freeze", value or " ", "-o", out]
    elif kind == "--check":
        args = ["freeze", "--check", value]
    else:
        args = ["freeze", "smoke", "-o", out] + ([] if kind == "-o" else [kind, value])
        if kind == "-o":
            args[3] = value
    assert_refused(kvgate(*args), case)
    assert not out.exists()


# --- matrix TOML --------------------------------------------------------------------------------------

MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["x"]\n{matrix}\n[treatment.x]\nkind = "{kind}"\n'
MATRIX += "{treatment}\n{tail}"
KINDS = {
    "eviction": {
        "sink_tokens": NOT_INT,
        "window": out_of(1, 1 << 31),
        "ratio": st.one_of(st.sampled_from(["1.0", "-0.1", "nan", "inf", '"half"', "true"])),
        "during_decoding": NOT_BOOL,
        "method": quoted(TEXT.filter(lambda s: s not in EVICTION_METHOD_NAMES)),
        "scope": NOT_STR,
    },
    "offload": {"block_size": out_of(1, 1 << 31), "tier": NOT_STR},
    "reuse": {"block_size": out_of(1, 1 << 31), "mode": NOT_STR},
    "quantize": {"dtype": NOT_STR, "scale": quoted(TEXT.filter(lambda s: s not in SCALES))},
}
MATRIX_KEYS = {
    "confirm_reruns": out_of(0, 10),
    "batch_size": out_of(1, 4096),
    "aa_replicate": NOT_BOOL,
    "seed": st.one_of(NOT_STR.filter(lambda s: s != "1"), st.integers(min_value=1 << 31).map(str)),
    "description": NOT_STR,
    "unknown_key": st.just("1"),
}
FAULTS = {
    "wrong_answer_rate": st.one_of(st.sampled_from(["1.5", "-0.5", "nan", '"x"', "true"])),
    "latency_s": st.sampled_from(["inf", "-1", "1e9", "nan", '"1"', "true", "61"]),
    "crash_after": st.sampled_from(["-1", "1.5", '"3"', "true"]),
    "salt_leak": NOT_BOOL,
    "no_such_fault": st.just("1"),
}


@st.composite
def bad_matrix(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(sorted(KINDS)))
    where = draw(st.sampled_from(["matrix", "treatment", "faults", "arm", "name", "raw"]))
    matrix = treatment = tail = ""
    if where == "matrix":
        key = draw(st.sampled_from(sorted(MATRIX_KEYS)))
        matrix = f"{key} = {draw(MATRIX_KEYS[key])}"
    elif where == "treatment":
        key = draw(st.sampled_from(sorted(KINDS[kind])))
        treatment = f"{key} = {draw(KINDS[kind][key])}"
    elif where == "faults":
        key = draw(st.sampled_from(sorted(FAULTS)))
        tail = f"[faults.x]\n{key} = {draw(FAULTS[key])}\n"
    elif where == "arm":
        tail = f"[arm.x]\nbatch_size = {draw(out_of(1, 4096))}\n"
    elif where == "name":
        name = draw(quoted(BAD_NAME))
        return f'[matrix]\ncontrol = "full"\ncandidates = [{name}]\n[treatment.x]\nkind = "full"\n'
    else:
        return draw(st.sampled_from(["a = " + "[" * 3000 + "]" * 3000, "[matrix\n", "= 1", "[[matrix]]\n"]))
    return MATRIX.format(matrix=matrix, kind=kind, treatment=treatment, tail=tail)


@FUZZ
@given(text=bad_matrix(), garble=st.booleans())
def test_bad_matrix_files(smoke_workload: Path, tmp_path: Path, text: str, garble: bool) -> None:
    tmp_path = fresh(tmp_path)
    spec = tmp_path / "m.toml"
    data = text.encode()
    spec.write_bytes(b"\xff" + data if garble else data)  # garbled: not UTF-8 at all
    out = tmp_path / "runs"
    result = kvgate("run", "--engine", "fake", "-w", smoke_workload, "-m", spec, "-o", out, "--quiet")
    assert_refused(result, text)
    assert not out.exists()


# --- suite TOML ---------------------------------------------------------------------------------------

SUITE_KEYS = {
    "per_cell": out_of(0, 100_000),
    "max_new_tokens": out_of(0, 65_536),
    "lengths": st.one_of(NOT_STR.filter(lambda s: s != "[1, 2]"), st.just("[1e9]"), st.just('["512"]')),
    "depths": st.sampled_from(['"0.5"', "[true]", '["x"]', "0.5"]),
    "haystack": NOT_STR,
    "no_such_param": st.just("1"),
}


@st.composite
def bad_suite(draw: st.DrawFn) -> str:
    where = draw(st.sampled_from(["param", "name", "generate", "generator", "description", "raw"]))
    name, description, body = '"fuzz"', '"d"', '[[generate]]\ngenerator = "passkey"\nlengths = [512]\n'
    if where == "param":
        key = draw(st.sampled_from(sorted(SUITE_KEYS)))
        body += f"{key} = {draw(SUITE_KEYS[key])}\n"
    elif where == "name":
        name = draw(quoted(BAD_NAME))
    elif where == "generate":
        body = "generate = " + draw(st.sampled_from(["5", "[1, 2]", '"x"', "[[1]]", "true"])) + "\n"
    elif where == "generator":
        generator = draw(st.one_of(NOT_STR, quoted(TEXT.map(lambda s: "no-" + s))))
        body = f"[[generate]]\ngenerator = {generator}\n"
    elif where == "description":
        description = draw(NOT_STR)
    else:
        return draw(st.sampled_from(["x = " + "{a = " * 2000 + "1" + "}" * 2000, "name = ", "[[generate]\n"]))
    return f"name = {name}\ndescription = {description}\n{body}"


@FUZZ
@given(text=bad_suite(), garble=st.booleans())
def test_bad_suite_files(tmp_path: Path, text: str, garble: bool) -> None:
    tmp_path = fresh(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_bytes((b"\xc3\x28" if garble else b"") + text.encode())
    out = tmp_path / "w.parquet"
    assert_refused(kvgate("freeze", spec, "-o", out), text)
    assert not out.exists()


# --- any spec file, any reader: encodings, depth, size ------------------------------------------------

NESTING = st.sampled_from(["dotted header", "array", "inline table", "header array"])
SPEC_BYTES = st.one_of(
    st.tuples(st.just("bytes"), st.binary(min_size=1, max_size=64).filter(lambda b: not _utf8(b))),
    st.tuples(st.just("deep"), st.tuples(NESTING, st.integers(65, 5000))),
    st.tuples(st.just("latin-1"), TEXT.map(lambda s: ("tau = 0.1 # é" + s).encode("latin-1", "replace"))),
)
READERS = st.sampled_from(["run --policy", "run -m", "run -m --arms", "simulate --policy", "report --policy"])


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _deep(kind: str, depth: int) -> bytes:
    if kind == "dotted header":
        text = "[" + ".".join(["a"] * depth) + "]\nx = 1\n"
    elif kind == "array":
        text = "x = " + "[" * depth + "]" * depth + "\n"
    elif kind == "inline table":
        text = "x = " + "{a = " * depth + "1" + "}" * depth + "\n"
    else:
        text = "[[" + ".".join(["a"] * depth) + "]]\nx = 1\n"
    return text.encode()


@settings(FUZZ, max_examples=60)
@given(spec=SPEC_BYTES, reader=READERS)
def test_any_spec_is_read_one_way_by_every_reader(
    smoke_workload: Path, finished_run: Path, tmp_path: Path, spec: tuple[str, object], reader: str
) -> None:
    """Every policy and matrix reader refuses the same bad bytes the same way: one line, exit 2 (bytes
    that are not UTF-8 and deep nesting were exit 70 through some of them)."""
    tmp_path = fresh(tmp_path)
    kind, detail = spec
    path = tmp_path / "spec.toml"
    data = _deep(*detail) if kind == "deep" else detail  # type: ignore[misc]
    path.write_bytes(data if isinstance(data, bytes) else b"")
    out = tmp_path / "runs"
    w = ["-w", str(smoke_workload)]
    args = {
        "run --policy": ["run", "--engine", "fake", *w, "--policy", path, "-o", out],
        "run -m": ["run", "--engine", "fake", *w, "-m", path, "-o", out],
        "run -m --arms": ["run", "--engine", "fake", *w, "-m", path, "--arms", "x", "-o", out],
        "simulate --policy": ["simulate", "--policy", path, "--runs", "10"],
        "report --policy": ["report", finished_run, "--policy", path, "--policy-changed-reason", "fuzz"],
    }[reader]
    assert_refused(kvgate(*args), (kind, reader))
    assert not out.exists()
