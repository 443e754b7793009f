"""Proof of treatment: every pass of a candidate arm shows, in the engine's own counters, that its
treatment ran (docs/reference.md, "Proof of treatment").

A gate that passes an arm whose treatment never ran calls safe what it never tested, so each kind must
leave its trace in the stored rows (`rundir.store.PROOF_COLUMNS`), in every pass (arm, replicate,
attempt), over the rows the engine answered (engine errors and timeouts, which carry no counters, left
out):

- quantize: KV entries quantised in every case (`n_kv_quantized` > 0) where the engine counts them, an
  quantised KV type (`kv_dtype`: 8-bit floats, a GGML block type, one of vLLM's newer cache dtypes) where
  it names one, and, where the arm and the control both
  count KV bytes, at most BYTES_SHARE_BOUND of the control's bytes per kept entry;
- eviction: every case keeps at most ⌈(1 − ratio)·m⌉ + EVICTION_SLACK of the m entries it may evict
  (the prompt; for scope "context" the context before the question, whose entries are kept besides);
- offload: KV blocks read back from the tier (> 0; an engine that counts only reads, the server, shows
  the writes by them): a tier written but never read back was never tested (nothing pushed the KV out
  of the pool);
- reuse: in a first pass of more than one case, cases served from the cache (`n_cached_tokens` > 0);
  span reuse: spans found (`n_spans_reused` > 0).

A counter the engine leaves null is no evidence. A composite must show every part's. An arm with a pass
that lacks its proof is an error (exit 4) unless its gate already fails it, never a PASS, in `kvgate
run` and `kvgate report` alike (`analysis.arm` decides it, `cli.findings` prints it); the report carries
the figures as `arms[].proof`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kvgate.arrow_numpy import NumpyColumns
from kvgate.rundir.result_part import PROOF_COLUMNS
from kvgate.rundir.store import read_results
from kvgate.treatments.spec import GGML_BLOCK_TYPES, VLLM_KV_DTYPES

BYTES_SHARE_BOUND = 0.75
"""A quantised arm's KV bytes per kept entry may be at most this share of the control's (FP8 stores half
of bfloat16's bytes and a quarter of float32's; scales and padding add a little)."""
EVICTION_SLACK = 1
"""Entries an eviction case may keep beyond ⌈(1 − ratio)·m⌉: the rounding of the kept count."""
READ = [
    "case_id", "arm", "replicate", "attempt", "fail_kind", "n_prompt_tokens", "n_cached_tokens",
    "n_kv_entries_kept", *PROOF_COLUMNS,
]  # fmt: skip


def eight_bit(dtype: str) -> bool:
    """Whether a KV dtype as an engine names it stores 8-bit floats (vLLM "fp8…", torch "float8…")."""
    return dtype.lower().startswith(("fp8", "float8"))


def quantised(dtype: str) -> bool:
    """Whether a KV dtype as an engine names it is quantised: 8-bit floats, a GGML block type
    (llama.cpp's q8_0, q4_0, …; "K+V" names K's and V's types when they differ), or one of vLLM's newer
    cache dtypes (int8_per_token_head, nvfp4, …)."""
    names = (*GGML_BLOCK_TYPES, *VLLM_KV_DTYPES)
    return eight_bit(dtype) or any(part in names for part in dtype.lower().split("+"))


@dataclass(frozen=True)
class _Rows:
    """The stored rows' columns as numpy arrays; −1 where an integer counter is null."""

    case_ids: pa.ChunkedArray
    arm: np.ndarray
    arm_names: list[str]
    replicate: np.ndarray
    attempt: np.ndarray
    verdict: np.ndarray
    prompt: np.ndarray
    cached: np.ndarray
    kept: np.ndarray
    kv_bytes: np.ndarray
    dtype: np.ndarray
    dtype_names: list[str]
    quantized: np.ndarray
    written: np.ndarray
    read: np.ndarray
    spans: np.ndarray

    @staticmethod
    def of(columns: NumpyColumns) -> _Rows:
        def ints(name: str) -> np.ndarray:
            return columns.get(name, -1, np.int64)

        arm, arm_names = columns.codes("arm")
        dtype, dtype_names = columns.codes("kv_dtype")
        fail_kind, kinds = columns.codes("fail_kind")
        errors = [i for i, k in enumerate(kinds) if k in ("engine_error", "timeout")]
        return _Rows(
            case_ids=columns.table["case_id"],
            arm=arm,
            arm_names=arm_names,
            replicate=ints("replicate"),
            attempt=ints("attempt"),
            verdict=~np.isin(fail_kind, errors),
            prompt=ints("n_prompt_tokens"),
            cached=ints("n_cached_tokens"),
            kept=ints("n_kv_entries_kept"),
            kv_bytes=ints("kv_bytes"),
            dtype=dtype,
            dtype_names=dtype_names,
            quantized=ints("n_kv_quantized"),
            written=ints("n_tier_written"),
            read=ints("n_tier_read"),
            spans=ints("n_spans_reused"),
        )

    def of_arm(self, arm: str) -> np.ndarray:
        if arm not in self.arm_names:
            return np.zeros(self.arm.shape, dtype=bool)
        return (self.arm == self.arm_names.index(arm)) & self.verdict

    def bytes_per_entry(self, mask: np.ndarray) -> float | None:
        known = mask & (self.kv_bytes >= 0) & (self.kept > 0)
        if not known.any():
            return None
        return float(self.kv_bytes[known].sum() / self.kept[known].sum())


def treatment_proofs(
    run_dir: Path, manifest: dict[str, Any], columns: NumpyColumns | None = None
) -> dict[str, dict[str, Any]]:
    """Each candidate arm's proof (the report's `arms[].proof`), from every stored row of the run: the
    READ columns of `columns` where the report has read and converted them already
    (analysis.run_data.RunRows), else read from the run's parts."""
    rows = _Rows.of(columns if columns is not None else NumpyColumns(read_results(run_dir, READ)))
    control = rows.of_arm(manifest["matrix"]["control"]) & (rows.replicate == 0) & (rows.attempt == 0)
    baseline = rows.bytes_per_entry(control)
    questions = _question_starts(manifest, rows)
    return {
        arm: _arm_proof(rows, arm, manifest["arms"][arm]["spec"], baseline, questions)
        for arm in manifest["matrix"]["candidates"]
    }


def missing_proofs(proofs: dict[str, dict[str, Any]]) -> list[str]:
    """One line per arm without its proof, naming every piece of evidence missing."""
    lines = []
    for arm, proof in proofs.items():
        if proof["status"] == "missing":
            prefix = f"arm {arm!r}: "
            lines.append(prefix + "; ".join(m.removeprefix(prefix) for m in proof["missing"]))
    return lines


def _question_starts(manifest: dict[str, Any], rows: _Rows) -> np.ndarray | None:
    """Per row, its case's `question_start` (−1 when null); None when no arm compresses the context."""
    scoped = any(
        p.get("kind") == "eviction" and p.get("scope") == "context"
        for info in manifest["arms"].values()
        for p in info["spec"].get("of") or [info["spec"]]
    )
    if not scoped:
        return None
    with pq.ParquetFile(manifest["workload_path"]) as workload:
        table = workload.read(columns=["case_id", "question_start"], use_threads=False)
    return question_starts_of(rows.case_ids, table)


def question_starts_of(case_ids: pa.ChunkedArray, workload: pa.Table) -> np.ndarray:
    """`question_start` of each id in `case_ids` ([rows]) from the workload's (case_id, question_start)
    columns, −1 where it is null or the case is not there; joined in Arrow (index_in then take), not
    through a dict of a million Python strings."""
    positions = pc.index_in(case_ids, value_set=workload["case_id"].combine_chunks())
    starts = pc.take(workload["question_start"], positions)
    return np.asarray(pc.fill_null(starts, -1).to_numpy(), dtype=np.int64)


class _Proof:
    """One arm's evidence, gathered pass by pass."""

    def __init__(self, arm: str) -> None:
        self.arm = arm
        self.missing: list[str] = []
        self.figures: dict[str, Any] = dict.fromkeys(
            (
                "kv_dtypes", "kv_quantized", "kv_bytes_per_entry", "control_kv_bytes_per_entry",
                "kv_kept_share", "eviction_over_bound", "tier_blocks_written", "tier_blocks_read",
                "cache_hit_cases", "spans_reused",
            )
        )  # fmt: skip
        self.passes = self.cases = 0
        self.kept = self.prompt = 0

    def add(self, key: str, value: int) -> None:
        self.figures[key] = (self.figures[key] or 0) + value

    def result(self) -> dict[str, Any]:
        if not self.passes:
            self.missing.append(
                f"arm {self.arm!r}: no case has a verdict, so nothing shows its treatment ran"
            )
        if self.prompt:
            self.figures["kv_kept_share"] = self.kept / self.prompt
        status = "missing" if self.missing else "shown"
        counts = {"passes": self.passes, "cases": self.cases}
        return {"status": status, "missing": self.missing, **counts, **self.figures}


def _arm_proof(
    rows: _Rows, arm: str, spec: dict[str, Any], baseline: float | None, questions: np.ndarray | None
) -> dict[str, Any]:
    proof = _Proof(arm)
    parts = spec.get("of") or [spec]
    mine = rows.of_arm(arm)
    replicates, attempts = rows.replicate[mine], rows.attempt[mine]
    passes = [  # each (replicate, attempt) stored, in order
        (replicate, attempt)
        for replicate in np.unique(replicates).tolist()
        for attempt in np.unique(attempts[replicates == replicate]).tolist()
    ]
    for replicate, attempt in passes:
        mask = mine & (rows.replicate == replicate) & (rows.attempt == attempt)
        label = f"arm {arm!r}" + (f" (A/A replicate {replicate})" if replicate else "")
        label += f" rerun {attempt}" if attempt else ""
        proof.passes += 1
        proof.cases += int(mask.sum())
        for part in parts:
            kind = part.get("kind")
            if kind == "quantize":
                _quantized(proof, rows, mask, label, baseline)
            elif kind == "eviction":
                _evicted(proof, rows, mask, label, part, questions)
            elif kind == "offload":
                _offloaded(proof, rows, mask, label)
            elif kind == "reuse" and attempt == 0 and mask.sum() > 1:
                _reused(proof, rows, mask, label, part.get("mode", "prefix"))
    return proof.result()


def _quantized(proof: _Proof, rows: _Rows, mask: np.ndarray, label: str, baseline: float | None) -> None:
    n = int(mask.sum())
    counted = rows.quantized[mask]
    counted = counted[counted >= 0]
    named = sorted({rows.dtype_names[c] for c in np.unique(rows.dtype[mask]).tolist() if c >= 0})
    if not counted.size and not named:
        proof.missing.append(f"{label}: the engine reported neither quantised KV entries nor its KV dtype")
    if counted.size:
        proof.add("kv_quantized", int(counted.sum()))
        zero = int((counted == 0).sum())
        if zero:
            proof.missing.append(
                f"{label}: the engine quantised no KV entry in {zero} of {counted.size} cases: "
                "the quantisation was not applied"
            )
    if named:
        proof.figures["kv_dtypes"] = sorted(set(proof.figures["kv_dtypes"] or []) | set(named))
        wide = [d for d in named if not quantised(d)]
        if wide:
            proof.missing.append(
                f"{label}: the engine stored its KV as {', '.join(wide)}, not a quantised KV type"
            )
    per_entry = rows.bytes_per_entry(mask)
    if per_entry is not None and baseline:
        proof.figures["kv_bytes_per_entry"] = per_entry
        proof.figures["control_kv_bytes_per_entry"] = baseline
        if per_entry > BYTES_SHARE_BOUND * baseline:
            proof.missing.append(
                f"{label}: {per_entry:.0f} KV bytes per entry against the control's {baseline:.0f} in {n} "
                f"cases: above {BYTES_SHARE_BOUND:.0%} of the control's, not what FP8 stores"
            )


def _evicted(
    proof: _Proof,
    rows: _Rows,
    mask: np.ndarray,
    label: str,
    part: dict[str, Any],
    questions: np.ndarray | None,
) -> None:
    ratio = float(part.get("ratio", 0.5))
    prompt, kept = rows.prompt[mask], rows.kept[mask]
    evictable = prompt
    if part.get("scope") == "context" and questions is not None:
        start = questions[mask]
        evictable = np.where((start > 0) & (start < prompt), start, prompt)
    promised = np.maximum(1, np.ceil((1 - ratio) * evictable - 1e-9).astype(np.int64))
    bound = promised + (prompt - evictable) + EVICTION_SLACK
    over = np.flatnonzero(kept > bound)
    proof.add("eviction_over_bound", int(over.size))
    counted = (prompt > 0) & (kept >= 0)
    proof.kept += int(kept[counted].sum())
    proof.prompt += int(prompt[counted].sum())
    if over.size:
        i = int(over[0])
        case = rows.case_ids[int(np.flatnonzero(mask)[i])].as_py()
        proof.missing.append(
            f"{label}: kept more KV entries than ratio {ratio:g} allows in {over.size} of {mask.sum()} cases "
            f"(case {case}: {kept[i]} of {prompt[i]} kept, at most {bound[i]}): the eviction did not run"
        )


def _offloaded(proof: _Proof, rows: _Rows, mask: np.ndarray, label: str) -> None:
    written, read = rows.written[mask], rows.read[mask]
    if (written < 0).all() and (read < 0).all():
        proof.missing.append(f"{label}: the engine reported no offload-tier counters (blocks written, read)")
        return
    out, back = int(written[written >= 0].sum()), int(read[read >= 0].sum())
    if (written >= 0).any():
        proof.add("tier_blocks_written", out)
    if (read >= 0).any():
        proof.add("tier_blocks_read", back)
    if back:
        return  # a block read back from the tier was written to it first
    if out:
        proof.missing.append(
            f"{label}: wrote {out} KV blocks to its offload tier but read none back: nothing pushed its KV "
            f"out of the pool, so the tier was never tested; put the arm under memory pressure: a kv_blocks "
            f"below what its requests need, in the matrix's [arm.{proof.arm}]"
        )
    else:
        proof.missing.append(
            f"{label}: wrote no KV block to its offload tier and read none in {mask.sum()} cases: "
            "the offload did not run"
        )


def _reused(proof: _Proof, rows: _Rows, mask: np.ndarray, label: str, mode: str) -> None:
    n = int(mask.sum())
    hits = int((rows.cached[mask] > 0).sum())
    proof.add("cache_hit_cases", hits)
    if mode != "span":
        if not hits:
            proof.missing.append(
                f"{label}: no case of {n} was served from its cache: the reuse never happened"
            )
        return
    spans = rows.spans[mask]
    if (spans < 0).all():
        proof.missing.append(f"{label}: the engine reported no span counter (spans found and reused)")
        return
    found = int(spans[spans >= 0].sum())
    proof.add("spans_reused", found)
    if not found:
        proof.missing.append(
            f"{label}: found no context span to reuse in {n} cases: the span reuse never happened"
        )
