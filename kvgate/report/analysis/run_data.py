"""A run's stored rows as dense per-case arrays: what the report's statistics are computed from.

Everything is indexed by the run's case position (0 … n_cases−1, workload order). Loading is vectorised
through pyarrow and numpy (parts placed by their first case and checked in one comparison, a hash join
only for the rest, then scatters); no Python loop runs per row, and only the columns the report needs
are read. A million rows in the runner's 1024-row parts load in about a second, most of it opening parts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kvgate.arrow_numpy import NumpyColumns, int64_array, repeated, to_numpy
from kvgate.errors import BadInput
from kvgate.report.analysis.isolation import PassCounters
from kvgate.report.analysis.row_texts import (
    TEXT_COLUMNS,
    CasePositions,
    Keep,
    KeptTexts,
    PartTexts,
    failing,
    failing_or_of_cases,
    index_in,
    read_texts,
    split,
)
from kvgate.rundir.integrity import PartCheck
from kvgate.rundir.result_part import PROOF_COLUMNS, read_part
from kvgate.rundir.store import part_paths
from kvgate.workload.decoded_size import read_bounded
from kvgate.workload.schema import open_workload

CERTIFICATE_SCORES = (
    "certificate_bound_max",
    "certificate_bound_mean",
    "certificate_relative_bound_mean",
    "certificate_relative_estimate_mean",
    "certificate_cap_share",
)
"""The certificate's per-case figures the report reads (analysis.certificate_attribution)."""
RESULT_COLUMNS = [
    "case_id", "arm", "replicate", "attempt", "passed", "fail_kind", "n_cached_tokens",
    "mean_logprob", "first_divergence", "n_prompt_tokens", "n_kv_entries_kept", "ttft_s", "latency_s",
    *CERTIFICATE_SCORES, *PROOF_COLUMNS,
]  # fmt: skip
"""What the report reads of each result part in one pass (rundir.result_part.read_part), with the texts
(analysis.row_texts.TEXT_COLUMNS) kept only for the rows a failing example may show; token ids never.
Parts stored before the certificate or the proof columns read them as null. The proof of treatment
(analysis.proof) and the isolation check (`RunRows.counters`) read their columns from the same read."""


@dataclass(frozen=True)
class CaseTable:
    """The run's cases in workload order: ids, the critical flag, prompt length and slice labels."""

    case_ids: pa.Array
    critical: np.ndarray
    n_prompt_tokens: np.ndarray
    """int64, −1 where unknown."""
    slice_columns: tuple[str, ...]
    labels: dict[str, tuple[np.ndarray, list[str]]]
    """column → (per-case code into the value list, −1 where null; the distinct values)."""
    clusters: np.ndarray
    """int64 per case: its prefix group's code, or a code of its own where it has none (a singleton)."""
    workload_rows: np.ndarray
    """int64 per case: its row in the workload file (the run's `--limit` selects a spread of them)."""

    @property
    def n(self) -> int:
        return len(self.case_ids)


@dataclass(frozen=True)
class ArmRows:
    """One (arm, replicate, first attempt) over the run's cases; absent cases have present = False. An
    array of one value for every case is read-only, sharing its one element (RunRows.arm_rows)."""

    present: np.ndarray
    passed: np.ndarray
    error: np.ndarray
    mean_logprob: np.ndarray
    """float64, NaN where unknown."""
    first_divergence: np.ndarray
    """int64, −1 where the output equals the control's or is unknown."""
    n_prompt_tokens: np.ndarray
    certificate: dict[str, np.ndarray]
    """Per CERTIFICATE_SCORES column: float64, NaN where the arm has no certificate (engines/hf/certificate)
    or the row was stored before the column."""

    @property
    def usable(self) -> np.ndarray:
        """Present and not an engine error: a verdict the statistics may use."""
        return self.present & ~self.error


@dataclass(frozen=True)
class Reruns:
    """Per case: how many confirm-reruns gave a verdict (no engine error), and how many of those passed."""

    valid: np.ndarray
    passes: np.ndarray


def selected_positions(n_workload: int, limit: int | None) -> np.ndarray:
    """Workload positions a run with `--limit` used: `limit` cases spread evenly (as the runner picks them;
    the manifest's case-id hash catches any drift)."""
    if limit is None or limit >= n_workload:
        return np.arange(n_workload)
    step = n_workload / limit
    return (np.arange(limit) * step).astype(np.int64)


def joined_lines(strings: pa.Array) -> bytes:
    """The UTF-8 bytes of "\\n".join(strings), built from the Arrow buffers without Python strings."""
    strings = strings.cast(pa.large_string())
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[
        strings.offset : strings.offset + len(strings) + 1
    ]
    data = np.frombuffer(strings.buffers()[2] or b"", dtype=np.uint8)
    body = data[offsets[0] : offsets[-1]]
    return np.insert(body, offsets[1:-1] - offsets[0], ord("\n")).tobytes()


def read_case_columns(parquet: pq.ParquetFile, meta: dict[str, Any], path: str) -> pa.Table:
    """The columns a case table is built from: ids, critical flag, prompt length, prefix group, slices."""
    slice_columns = tuple(meta.get("slice_columns", ()))
    columns = [
        "case_id", "critical", "n_prompt_tokens", "prefix_group",
        *(c for c in slice_columns if c != "task"), "task",
    ]  # fmt: skip
    try:
        return read_bounded(Path(path), list(dict.fromkeys(columns)))  # memory bounded by the file's size
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise BadInput(f"workload {path} lacks a column: {str(exc).splitlines()[0]}") from None


def case_table(table: pa.Table, slice_columns: tuple[str, ...], workload_rows: np.ndarray) -> CaseTable:
    """A CaseTable from the columns `read_case_columns` reads (in the order of the rows given: the
    workload's rows at `workload_rows`)."""
    labels = {}
    for col in slice_columns:
        encoded = pc.dictionary_encode(table[col].combine_chunks())
        codes = to_numpy(encoded.indices, -1, np.int64)
        labels[col] = (codes, [str(v) for v in encoded.dictionary.to_pylist()])
    return CaseTable(
        case_ids=table["case_id"].combine_chunks(),
        critical=to_numpy(table["critical"], False, bool),
        n_prompt_tokens=to_numpy(table["n_prompt_tokens"], -1, np.int64),
        slice_columns=slice_columns,
        labels=labels,
        clusters=cluster_codes(table["prefix_group"].combine_chunks()),
        workload_rows=np.asarray(workload_rows, dtype=np.int64),
    )


def read_workload_cases(path: str) -> CaseTable:
    """Every case of a frozen workload, as the report would slice them (for `kvgate simulate`); the
    workload is verified first as `kvgate run` verifies it (its rows against its content sha256)."""
    from kvgate.workload.schema import read_workload

    read_workload(Path(path))
    parquet, meta = open_workload(Path(path))
    table = read_case_columns(parquet, meta, path)
    if table["case_id"].null_count:
        raise BadInput(f"workload {path} has a case without a case_id")
    return case_table(table, tuple(meta.get("slice_columns", ())), np.arange(table.num_rows))


def read_cases(manifest: dict[str, Any]) -> CaseTable:
    """The run's cases from the workload its manifest names, checked against the manifest's hashes.

    The workload's stored content hash must equal the run's, and the selected case ids must hash to
    the manifest's `case_ids`. Rows are not re-hashed here (a frozen workload's rows are verified when it
    is run and by `kvgate freeze --check`); that keeps reports of large runs fast.
    """
    path = manifest.get("workload_path")
    if not path:
        raise BadInput(f"run {manifest.get('run_id')}: the manifest names no workload")
    if not Path(path).exists():
        raise BadInput(f"workload {path} (named by run {manifest['run_id']}) does not exist")
    parquet, meta = open_workload(Path(path))  # the metadata checks `kvgate run` makes
    if meta.get("content_sha256") != manifest["workload_sha256"]:
        raise BadInput(f"workload {path} changed since run {manifest['run_id']}")
    table = read_case_columns(parquet, meta, path)
    positions = selected_positions(table.num_rows, manifest.get("limit"))
    if len(positions) != table.num_rows:
        table = table.take(int64_array(positions))
    ids = table["case_id"].combine_chunks()
    if ids.null_count:
        raise BadInput(f"workload {path} has a case without a case_id")
    digest = hashlib.sha256(joined_lines(ids)).hexdigest()
    if digest != manifest.get("case_ids"):
        raise BadInput(f"workload {path}: the cases selected do not match run {manifest['run_id']}")
    return case_table(table, tuple(meta.get("slice_columns", ())), positions)


def cluster_codes(groups: pa.Array) -> np.ndarray:
    """Per case: the code of its prefix group; cases without one (null or "") get codes of their own."""
    encoded = pc.dictionary_encode(groups)
    codes = np.array(to_numpy(encoded.indices, -1, np.int64), dtype=np.int64)
    values = encoded.dictionary.to_pylist()
    if "" in values:
        codes = np.where(codes == values.index(""), -1, codes)
    return own_codes_for_missing(codes, len(values))


def own_codes_for_missing(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Cluster codes from value codes: a case with no value (−1) becomes a cluster of its own."""
    out = np.array(codes, dtype=np.int64)
    alone = out < 0
    out[alone] = n_values + np.arange(int(alone.sum()))
    return out


NUMERIC = {  # column → (fill for null, dtype)
    "replicate": (0, np.int64),
    "attempt": (0, np.int64),
    "passed": (False, bool),
    "n_cached_tokens": (0, np.int64),
    "mean_logprob": (np.nan, np.float64),
    "first_divergence": (-1, np.int64),
    "n_prompt_tokens": (-1, np.int64),
    "n_kv_entries_kept": (-1, np.int64),
    "ttft_s": (np.nan, np.float64),
    "latency_s": (np.nan, np.float64),
    **{name: (np.nan, np.float64) for name in CERTIFICATE_SCORES},
    "kv_bytes": (-1, np.int64),
}
DICTIONARY_COLUMNS = ("arm", "fail_kind")
"""Few distinct values: read dictionary-encoded, never materialised as a million strings."""


def report_columns(path: Path, check: PartCheck | None = None, extra: Sequence[str] = ()) -> pa.Table:
    """RESULT_COLUMNS (and `extra`) of one result part, `arm` and `fail_kind` dictionary-encoded, through
    the store's one part reader (rundir.result_part: versions, upgrade, checksums; `check` against the
    run's index)."""
    return read_part(path, [*RESULT_COLUMNS, *extra], dictionary=DICTIONARY_COLUMNS, check=check)


SPLIT_PARTS = 16
"""Consecutive parts of one arm whose texts are split off together (one concatenation, one selection and
one take instead of one of each per part); the texts of as many parts are held at once."""


def groups_of(indices: list[int], paths: list[Path]) -> list[list[int]]:
    """`indices` (ascending) cut into runs of at most SPLIT_PARTS consecutive parts of the same arm's folder
    (a part holds consecutive cases, so a group's rows do too: analysis.row_texts.CasePositions)."""
    out: list[list[int]] = []
    for i in indices:
        last = out[-1] if out else None
        if (
            last
            and len(last) < SPLIT_PARTS
            and last[-1] == i - 1
            and paths[last[-1]].parent == paths[i].parent
        ):
            last.append(i)
        else:
            out.append([i])
    return out


def read_parts(
    paths: list[Path], cases: CaseTable, check: PartCheck | None, texts_for: str | None
) -> tuple[list[pa.Table], list[int], list[PartTexts] | None]:
    """The parts' report columns in `paths` order: tables of one or more consecutive parts, each part's
    row count, and with `texts_for` (the control arm) the texts of the rows a report may show, one
    PartTexts per table (analysis.row_texts): the candidates' parts first, then the control's, keeping
    its answers to the cases another arm failed.

    One thread reads them: on the 10⁶-row bench run (980 parts, 2 cores) the report took 0.86–0.92× the
    CPU seconds it took with two reading threads (medians of 4 alternated fresh processes, twice, at
    load 3), in no more wall time on a machine with other work."""
    if texts_for is None:
        tables = [report_columns(path, check) for path in paths]
        return tables, [t.num_rows for t in tables], None

    def reading(keep: Keep) -> Callable[[list[int]], tuple[list[int], PartTexts]]:
        def read(group: list[int]) -> tuple[list[int], PartTexts]:
            tables = [report_columns(paths[i], check, TEXT_COLUMNS) for i in group]
            return [t.num_rows for t in tables], split(pa.concat_tables(tables), keep)

        return read

    first = groups_of([i for i, path in enumerate(paths) if path.parent.name != texts_for], paths)
    done = {group[0]: reading(failing)(group) for group in first}
    second = groups_of([i for i, path in enumerate(paths) if path.parent.name == texts_for], paths)
    if second:
        failed = [p.rows["case_id"].combine_chunks().take(int64_array(p.kept)) for _, p in done.values()]
        wanted = np.zeros(cases.n, dtype=bool)
        if failed:
            at = index_in(pa.concat_arrays(failed), cases.case_ids)
            wanted[at[at >= 0]] = True
        read = reading(failing_or_of_cases(wanted, CasePositions(cases.case_ids)))
        done |= {group[0]: read(group) for group in second}
    parts = [done[i] for i in sorted(done)]
    return [p.rows for _, p in parts], [n for lengths, _ in parts for n in lengths], [p for _, p in parts]


def positions(case_ids: pa.ChunkedArray, cases: CaseTable, run_dir: Path) -> np.ndarray:
    """Each row's case position; a case outside the run is a BadInput.

    Parts usually hold consecutive cases in workload order (runs write them so): each chunk is placed by
    looking up its first case and checked against the workload's ids in one vectorised comparison over
    all chunks; only chunks that fail the check go through a hash join.
    """
    chunks = [c for c in case_ids.chunks if len(c)]
    if not chunks:
        return np.zeros(0, dtype=np.int64)
    lengths = np.array([len(c) for c in chunks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    firsts = index_in(pa.concat_arrays([c.slice(0, 1) for c in chunks]), cases.case_ids)
    placed = (firsts >= 0) & (firsts + lengths <= cases.n)
    expected = pa.concat_arrays(
        [
            cases.case_ids.slice(int(f), len(c)) if ok else c
            for c, f, ok in zip(chunks, firsts, placed, strict=True)
        ]
    )
    actual = pa.concat_arrays(chunks)
    same = to_numpy(pc.equal(actual, expected), False, bool)
    placed &= np.logical_and.reduceat(same, starts)
    out = np.repeat(firsts - starts, lengths) + np.arange(int(lengths.sum()))
    rest = ~np.repeat(placed, lengths)
    if rest.any():
        others = actual.filter(
            pa.Array.from_buffers(
                pa.bool_(), len(rest), [None, pa.py_buffer(np.packbits(rest, bitorder="little"))]
            )
        )
        index = pc.index_in(others, value_set=cases.case_ids)
        if index.null_count:
            stray = pc.filter(others, pc.is_null(index))[0].as_py()
            raise BadInput(f"{run_dir}: result rows for case {stray!r}, which is not in the run's workload")
        out[rest] = to_numpy(index, -1, np.int64)
    return out


class RunRows:
    """Every stored result row of a run, joined to case positions; dense views per arm on demand.

    Parts are read one after another (`read_parts`), each with only the columns needed (and, given the
    run's `PartCheck`, checked against its index entry and binding from the same bytes);
    every later step runs once over all rows: no per-part or per-row Python work beyond opening files.
    """

    def __init__(
        self,
        run_dir: Path,
        cases: CaseTable,
        arm_names: list[str],
        check: PartCheck | None = None,
        texts_for: str | None = None,
    ) -> None:
        """`texts_for`: the control arm, to keep the texts of failing rows and its answers beside them
        from the same read (analysis.row_texts); None keeps none (a report without examples)."""
        paths = list(check.live) if check is not None and check.live is not None else part_paths(run_dir)
        parts, part_rows, texts = read_parts(paths, cases, check, texts_for)
        self.n = cases.n
        self.case_ids = cases.case_ids
        self.arm_names = arm_names
        self.run_dir = run_dir
        self.paths = paths
        self.part_starts = np.cumsum(np.array([0, *part_rows], dtype=np.int64))
        """Where each part's rows start among the rows (and, last, their count): `part_of` finds a row's."""
        table_rows = np.array([t.num_rows for t in parts], dtype=np.int64)
        self.kept = KeptTexts.of(texts or [], np.cumsum(table_rows) - table_rows)
        """The texts the read kept (analysis.row_texts)."""
        table = pa.concat_tables(parts) if parts else None
        del parts, texts
        if table is not None:
            self.case = positions(table["case_id"], cases, run_dir)
        self.table = table
        """The columns read (None without rows), for the proof of treatment. Kept in its parts' chunks:
        a combined copy costs more (fresh pages) than combining each column as it is converted."""
        self.columns = NumpyColumns(table) if table is not None else None
        """`table`'s columns as numpy arrays, each converted once (the proof of treatment reads them too)."""
        if self.columns is not None:
            arm, arm_values = self.columns.codes("arm")
            unknown = sorted(set(arm_values) - set(arm_names))
            if unknown:
                raise BadInput(
                    f"{run_dir}: result rows of arm {unknown[0]!r}, which the manifest does not name"
                )
            kinds, kind_values = self.columns.codes("fail_kind")
            self.arm = np.array([arm_names.index(a) for a in arm_values] + [-1], dtype=np.int64)[arm]
            self.error = np.array([k == "engine_error" for k in kind_values] + [False])[kinds]
            cols = {c: self.columns.get(c, fill, dtype) for c, (fill, dtype) in NUMERIC.items()}
        else:
            self.case, self.arm, self.error = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
            cols = {c: np.zeros(0, dtype) for c, (_, dtype) in NUMERIC.items()}
        self.replicate, self.attempt, self.passed = cols["replicate"], cols["attempt"], cols["passed"]
        self.cached, self.mean_logprob = cols["n_cached_tokens"], cols["mean_logprob"]
        self.first_divergence, self.n_prompt_tokens = cols["first_divergence"], cols["n_prompt_tokens"]
        self.kv_kept, self.ttft, self.latency = cols["n_kv_entries_kept"], cols["ttft_s"], cols["latency_s"]
        self.certificate = {name: cols[name] for name in CERTIFICATE_SCORES}
        self.kv_bytes = cols["kv_bytes"]

    def counters(self) -> PassCounters:
        """The rows' cache counters, for the isolation check (analysis.isolation) without reading again."""
        return PassCounters(
            arm=self.arm,
            arm_names=self.arm_names,
            replicate=self.replicate,
            attempt=self.attempt,
            n_cached_tokens=self.cached,
            case_id=lambda rows: self.case_ids.take(int64_array(self.case[rows])).to_pylist(),
        )

    def texts(self, rows: np.ndarray, columns: Sequence[str]) -> dict[str, list[Any]]:
        """`columns` (TEXT_COLUMNS, fail_kind, first_divergence) of the rows at `rows` (−1: no row, None):
        texts from those the read kept, the others read from their parts; the rest from the columns read."""
        out: dict[str, list[Any]] = {c: [None] * len(rows) for c in columns}
        have = np.flatnonzero(rows >= 0)
        read = [c for c in columns if c not in TEXT_COLUMNS]
        if read and have.size:
            _fill(out, have, self._table().select(read).take(int64_array(rows[have])))
        wanted = [c for c in columns if c in TEXT_COLUMNS]
        if wanted and have.size:
            found, at = self.kept.find(rows)
            hit = np.flatnonzero(found)
            _fill(out, hit, self.kept.texts.select(wanted).take(int64_array(at[hit])))
            rest = np.flatnonzero(~found & (rows >= 0))
            if rest.size:
                part, offset = self.part_of(rows[rest])
                late = read_texts(self.paths, part, offset, wanted)
                for column, values in late.items():
                    for j, value in zip(rest.tolist(), values, strict=True):
                        out[column][j] = value
        return out

    def part_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each of `rows`' part, its index in `paths`; its row in that part), found among the parts' starts
        rather than held per row (16 MB per 10⁶ rows, for the few texts read late)."""
        part = np.searchsorted(self.part_starts, rows, side="right") - 1
        return part, rows - self.part_starts[part]

    def _table(self) -> pa.Table:
        assert self.table is not None  # a row index exists only where rows were read
        return self.table

    def first_attempts(self, arm: str, replicate: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, their case positions) of `arm`'s first attempts of `replicate`."""
        rows = np.flatnonzero(self._of(arm) & (self.replicate == replicate) & (self.attempt == 0))
        return rows, self.case[rows]

    def _of(self, arm: str) -> np.ndarray:
        return self.arm == self.arm_names.index(arm)

    def arm_rows(self, arm: str, replicate: int = 0) -> ArmRows:
        """The first attempt of `arm`'s `replicate` over every case; a case stored twice is an error."""
        sel = self._of(arm) & (self.replicate == replicate) & (self.attempt == 0)
        idx = self.case[sel]
        counts = np.bincount(idx, minlength=self.n)
        if np.any(counts > 1):
            raise BadInput(f"{self.run_dir}: arm {arm!r} replicate {replicate} stores a case twice")
        present = counts == 1
        every = bool(present.all())

        def dense(values: np.ndarray, fill: Any) -> np.ndarray:
            if values.size and values.strides == (0,):  # one value throughout (arrow_numpy.one_value)
                one = values[:1].copy()
                if every or np.array([fill], dtype=values.dtype).tobytes() == one.tobytes():
                    return repeated(one, self.n)  # that value (or the fill) for every case
            out = np.full(self.n, fill, dtype=values.dtype)
            out[idx] = values[sel]
            return out

        return ArmRows(
            present=present,
            passed=dense(self.passed, False),
            error=dense(self.error, False),
            mean_logprob=dense(self.mean_logprob, np.nan),
            first_divergence=dense(self.first_divergence, -1),
            n_prompt_tokens=dense(self.n_prompt_tokens, -1),
            certificate={name: dense(values, np.nan) for name, values in self.certificate.items()},
        )

    def has_replicate(self, arm: str, replicate: int) -> bool:
        return bool(np.any(self._of(arm) & (self.replicate == replicate)))

    def reruns(self, arm: str) -> Reruns:
        sel = self._of(arm) & (self.attempt > 0) & ~self.error
        valid = np.bincount(self.case[sel], minlength=self.n)
        passes = np.bincount(self.case[sel & self.passed], minlength=self.n)
        return Reruns(valid=valid, passes=passes)

    def cache_hits(self, arm: str) -> tuple[int, int]:
        """(rows of `arm` that reported cached tokens, rows of `arm`)."""
        mine = self._of(arm)
        return int(np.count_nonzero(mine & (self.cached > 0))), int(np.count_nonzero(mine))


def _fill(out: dict[str, list[Any]], where: np.ndarray, table: pa.Table) -> None:
    """Set `out[column][j]` for each j in `where` to the matching row of `table`'s column."""
    for column in table.column_names:
        for j, value in zip(where.tolist(), table[column].to_pylist(), strict=True):
            out[column][j] = value
