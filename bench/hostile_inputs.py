"""The hostile battery's base inputs, made once by the kvgate tree under test (`hostile_battery.py` runs
this in a child with that tree first on PYTHONPATH): a tiny frozen workload, a complete fake-engine run,
a weightless model folder with a workload frozen for it (the stub server's), and the Parquet files the
battery's workload and run-directory mutations need (forged columns, a decompression bomb, parts that
declare other schema versions, with the index re-hashed so only the reader under test can refuse them).

    python bench/hostile_inputs.py BASE_DIR
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.rundir.part_index import file_sha256
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

SMALL_MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n'
SMALL_SUITE = (
    'name = "tiny"\ndescription = "two passkey cases"\n\n[[generate]]\ngenerator = "passkey"\n'
    'lengths = [512]\ndepths = [0.1, 0.9]\nper_cell = 1\nhaystack = "noise"\n'
)
TRACE = "".join(
    json.dumps({"messages": [{"role": "user", "content": f"Code {i}?"}], "expected": [str(i)]}) + "\n"
    for i in range(6)
)


def kvgate(*args: str) -> None:
    subprocess.run([sys.executable, "-c", "from kvgate.cli import main; main()", *args], check=True)


def rehash(run: Path) -> None:
    """Rewrite `run`'s index so its checksums and row counts match the parts now there."""
    index_path = run / "results" / "index.json"
    index = json.loads(index_path.read_text())
    for name, entry in index["parts"].items():
        part = run / "results" / name
        entry["sha256"] = file_sha256(part)
        entry["rows"] = pq.ParquetFile(part).metadata.num_rows
    index_path.write_text(json.dumps(index, indent=1))


def forged_workloads(source: Path, out: Path) -> None:
    """One workload per (column, forgery), each with the original metadata: what a hand-edited or
    hostile workload file may hold that `freeze` never writes."""
    table = pq.read_table(source)
    meta = table.schema.metadata
    out.mkdir()
    n = table.num_rows
    for name in table.column_names:
        column = table.column(name)
        kind = column.type
        forgeries: dict[str, pa.Array] = {"null": pa.nulls(n, kind)}
        if pa.types.is_integer(kind):
            forgeries |= {"negative": pa.array([-7] * n, kind), "max": pa.array([2**31 - 1] * n, kind)}
        if pa.types.is_string(kind):
            forgeries |= {"empty": pa.array([""] * n), "huge": pa.array(["x" * 200_000] * n)}
            forgeries["not-json"] = pa.array(["{[" * 50] * n)
        if pa.types.is_list(kind):
            forgeries |= {"empty": pa.array([[]] * n, kind), "negative": pa.array([[-1, -2]] * n, kind)}
            forgeries["huge-id"] = pa.array([[2**31 - 1] * 3] * n, kind)
        for forgery, values in forgeries.items():
            forged = table.set_column(table.column_names.index(name), name, values)
            pq.write_table(forged.replace_schema_metadata(meta), out / f"{name}.{forgery}.parquet")
        dropped = table.drop_columns([name]).replace_schema_metadata(meta)
        pq.write_table(dropped, out / f"{name}.dropped.parquet")
    pq.write_table(table.replace_schema_metadata(None), out / "no-metadata.parquet")
    pq.write_table(table.replace_schema_metadata({b"kvgate.workload": b"{" * 10}), out / "bad-meta.parquet")
    deep = b"[" * 100_000 + b"]" * 100_000
    pq.write_table(table.replace_schema_metadata({b"kvgate.workload": deep}), out / "deep-meta.parquet")
    pq.write_table(table.slice(0, 0).replace_schema_metadata(meta), out / "no-rows.parquet")
    pq.write_table(pa.concat_tables([table, table]).replace_schema_metadata(meta), out / "twice.parquet")
    ids = table.column("prompt_token_ids").type
    bomb = pa.array([[0] * 20_000_000] + [[0]] * (n - 1), ids)
    forged = table.set_column(table.column_names.index("prompt_token_ids"), "prompt_token_ids", bomb)
    pq.write_table(forged.replace_schema_metadata(meta), out / "bomb.parquet", compression="zstd")


def versioned_runs(run: Path, out: Path) -> None:
    """Copies of `run` whose parts declare another result schema version (or none, or garbage), and
    whose index is re-hashed to match."""
    out.mkdir()
    for version in [b"0", b"1", b"3", b"5", b"99", b"-1", b"x", b"", b"4" * 400, None]:
        label = "none" if version is None else (version.decode()[:8] or "empty")
        copy = out / f"part-version-{label}"
        shutil.copytree(run, copy)
        for part in (copy / "results").rglob("*.parquet"):
            table = pq.read_table(part)
            meta = dict(table.schema.metadata or {})
            if version is None:
                meta.pop(b"kvgate.result_schema_version", None)
            else:
                meta[b"kvgate.result_schema_version"] = version
            pq.write_table(table.replace_schema_metadata(meta), part)
        rehash(copy)
    copy = out / "part-binding-other-run"
    shutil.copytree(run, copy)
    for part in (copy / "results").rglob("*.parquet"):
        table = pq.read_table(part)
        meta = dict(table.schema.metadata or {})
        meta[b"kvgate.part"] = json.dumps({"arm": part.parent.name, "run_id": "other"}).encode()
        pq.write_table(table.replace_schema_metadata(meta), part)
    rehash(copy)
    for column, values in [
        ("passed", None),
        ("case_id", "nope"),
        ("replicate", -5),
        ("output_token_ids", []),
    ]:
        copy = out / f"part-forged-{column}"
        shutil.copytree(run, copy)
        for part in (copy / "results").rglob("*.parquet"):
            table = pq.read_table(part)
            at = table.column_names.index(column)
            kind = table.schema.field(column).type
            forged = pa.array([values] * table.num_rows, kind)
            pq.write_table(
                table.set_column(at, column, forged).replace_schema_metadata(table.schema.metadata), part
            )
        rehash(copy)


def main(base: Path) -> None:
    base.mkdir(parents=True)
    (base / "small.toml").write_text(SMALL_MATRIX)
    (base / "suite.toml").write_text(SMALL_SUITE)
    (base / "trace.jsonl").write_text(TRACE)
    shutil.copy(Path(__file__).resolve().parent.parent / "treatments" / "policy.toml", base / "policy.toml")
    kvgate("freeze", "smoke", "--limit", "4", "-o", str(base / "w.parquet"))
    common = ["--engine", "fake", "-w", str(base / "w.parquet"), "-m", str(base / "small.toml"), "--quiet"]
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from kvgate.cli import main; main()",
            "run",
            *common,
            "--run-dir",
            str(base / "run"),
        ]
    )
    if not (base / "run" / "results" / "index.json").is_file():
        raise SystemExit("the base run did not complete")
    model = base / "stub-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "stub"}))

    class ForTheStub(WordTokenizer):
        name = str(model)

    freeze(["smoke"], base / "ws.parquet", ForTheStub(), seed=0, limit=2)
    forged_workloads(base / "w.parquet", base / "forged")
    versioned_runs(base / "run", base / "versions")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
