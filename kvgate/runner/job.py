"""`kvgate run` as one function: resolve inputs, prepare the run directory, generate, report."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate.engines.registry import create_engine, engine_info
from kvgate.errors import BadInput
from kvgate.gate.policy import Policy, load_policy, parse_policy
from kvgate.models import DEFAULT_MODEL, ModelSpec, model_folder, model_identity, resolve_model
from kvgate.runner.manifest import read_manifest
from kvgate.runner.run import NoProgress, Progress, RunContext, execute, prepare_run, select_cases
from kvgate.treatments.matrix import Matrix, parse_matrix, resolve_matrix
from kvgate.workload.schema import Workload, read_workload

DEFAULT_SUITE = "smoke"
DEFAULT_MATRIX = "default"


@dataclass
class RunOptions:
    workload: Path | None = None
    matrix: str = DEFAULT_MATRIX
    engine: str = "hf"
    model: str = DEFAULT_MODEL
    policy: Path | None = None
    runs_dir: Path = Path("runs")
    resume: Path | None = None
    limit: int | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)


def default_workload(model: ModelSpec, engine: str, runs_dir: Path) -> Path:
    """The default suite frozen for `model`'s tokenizer (the fake engine uses the word tokenizer), cached."""
    from kvgate.workload.freeze import freeze
    from kvgate.workload.tokenizer import PromptTokenizer, WordTokenizer

    tok: PromptTokenizer
    if engine == "fake":
        tok, tag = WordTokenizer(), "words"
    else:
        from kvgate.workload.hf_tokenizer import HFPromptTokenizer

        tok, tag = HFPromptTokenizer.from_folder(model_folder(model), model.name), Path(model.name).name
    path = runs_dir / "workloads" / f"{DEFAULT_SUITE}.{tag}.parquet"
    if not path.exists():
        freeze([DEFAULT_SUITE], path, tok, seed=0)
    return path


def _from_manifest(opts: RunOptions) -> tuple[RunOptions, Matrix, Policy]:
    """For --resume: the stored run's inputs, so that only what really changed is reported."""
    assert opts.resume is not None
    manifest = read_manifest(opts.resume)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(manifest["matrix_text"])
    try:
        matrix = parse_matrix(Path(f.name))
    finally:
        Path(f.name).unlink()
    policy = parse_policy(manifest["policy_text"], f"{opts.resume}/manifest.json policy")
    workload = opts.workload or Path(manifest["workload_path"])
    resumed = RunOptions(
        workload=workload,
        engine=manifest["engine"]["engine"],
        model=manifest["model"]["name"],
        runs_dir=opts.resume.parent,
        resume=opts.resume,
        limit=manifest.get("limit"),
        engine_options=opts.engine_options,
    )
    return resumed, matrix, policy


def run_job(opts: RunOptions, progress: Progress | None = None) -> Path:
    """Run (or resume) the matrix; returns the run directory. Bad input raises before any generation."""
    if opts.resume is not None:
        opts, matrix, policy = _from_manifest(opts)
    else:
        matrix, policy = resolve_matrix(opts.matrix), load_policy(opts.policy)
    engine_info(opts.engine)
    model = resolve_model(opts.model)
    if opts.limit is not None and opts.limit < 1:
        raise BadInput(f"--limit must be ≥ 1, got {opts.limit}")
    workload_path = opts.workload or default_workload(model, opts.engine, opts.runs_dir)
    workload: Workload = read_workload(workload_path)
    cases = select_cases(workload, opts.limit)
    identity = {"name": model.name} if opts.engine == "fake" else model_identity(model)
    engine = create_engine(opts.engine, model, **opts.engine_options)
    try:
        run_dir, manifest = prepare_run(
            opts.runs_dir, workload, cases, identity, engine, matrix, policy, opts.resume, opts.limit
        )
        ctx = RunContext(run_dir, manifest, workload, cases, matrix, policy, engine, progress or NoProgress())
        execute(ctx)
    finally:
        engine.close()
    return run_dir
