"""`kvgate run` as one function: resolve inputs, open the run directory, generate.

A new run takes what is given and the defaults for the rest, in a new run directory
(`<runs_dir>/<run id>`, or exactly `run_dir`, which must not hold anything yet). A resumed run
(`resume`) takes everything from its manifest; what is given explicitly must match it, or the resume is
refused naming what changed (so does a changed workload file, model, engine library or treatment
catalog). Bad input is refused before anything is written or generated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvgate import __version__
from kvgate.engines.capability import check_capable
from kvgate.engines.collector_pause import thaw
from kvgate.engines.options import check_engine_options
from kvgate.engines.registry import DEFAULT_ENGINE, engine_info
from kvgate.errors import BadInput, RunInterrupted
from kvgate.gate.feasibility import check_safe, check_winnable
from kvgate.gate.policy import Policy, load_policy, parse_policy
from kvgate.gate.policy_slices import check_policy_slices
from kvgate.models import (
    DEFAULT_MODEL,
    ModelSpec,
    check_model_folder,
    model_folder,
    model_identity,
    resolve_model,
)
from kvgate.rundir.lock import run_lock
from kvgate.rundir.manifest import MANIFEST, build_manifest, read_manifest, stopped_before_it_began
from kvgate.rundir.store import reconcile, remove_superseded_parts, remove_temp_files
from kvgate.runner.case_keys import cluster_key
from kvgate.runner.context import Executor, NoProgress, Progress, RunContext
from kvgate.runner.run import check_applicable, open_run, refuse_if_changed
from kvgate.runner.shared_prefix_reuse import shared_prefix_reuse_warning
from kvgate.runner.tokenizer_match import check_tokenizer
from kvgate.treatments.matrix import (
    DEFAULT_MATRIX,
    SCHEDULE_KEYS,
    Matrix,
    check_run_size,
    parse_matrix_text,
    resolve_matrix,
)
from kvgate.workload.case import case_labels
from kvgate.workload.checks import MAX_CASES, check_validators
from kvgate.workload.schema import read_workload
from kvgate.workload.selection import select_cases

DEFAULT_SUITE = "smoke"
RESUMABLE_FROM: frozenset[str] = frozenset()
"""Other kvgate versions whose runs this one may resume: their manifest, index and result parts are
formats this version reads and writes the same way (none yet: 0.1.0 is the only release)."""


@dataclass
class RunOptions:
    """What the user gave; None means "not given" (the default, or the stored value when resuming)."""

    workload: Path | None = None
    matrix: str | None = None
    engine: str | None = None
    model: str | None = None
    policy: Path | None = None
    runs_dir: Path = Path("runs")
    resume: Path | None = None
    limit: int | None = None
    engine_options: dict[str, Any] | None = None
    policy_unsafe_reason: str | None = None
    run_dir: Path | None = None


@dataclass(frozen=True)
class Inputs:
    """The resolved inputs of a run."""

    workload: Path | None
    matrix: Matrix
    policy: Policy
    engine: str
    model: ModelSpec
    limit: int | None
    engine_options: dict[str, Any]


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


def version_skew(run_dir: Path, stored: dict[str, Any]) -> str:
    """ "" when the run was made by this kvgate; a line saying so when by a version whose formats this one
    declares compatible (RESUMABLE_FROM); any other version is refused: its parts and manifest may mean
    something else."""
    made_by = stored.get("kvgate_version")
    if made_by == __version__:
        return ""
    if made_by in RESUMABLE_FROM:
        return f"resuming a run made by kvgate {made_by} with kvgate {__version__} (formats compatible)"
    raise BadInput(
        f"cannot resume {run_dir}: it was made by kvgate {str(made_by)[:40]!r}, whose formats kvgate "
        f"{__version__} does not declare compatible; finish it with that version, or start a new run"
    )


def resolve_inputs(opts: RunOptions, stored: dict[str, Any] | None) -> Inputs:
    """Given options over the stored manifest's (when resuming) over the defaults."""
    if stored is not None:
        where = f"{opts.resume}/manifest.json"
        matrix = resolve_matrix(opts.matrix) if opts.matrix else _stored_matrix(stored, where)
        policy = (
            load_policy(opts.policy)
            if opts.policy
            else parse_policy(stored["policy_text"], f"{where} policy")
        )
        return Inputs(
            workload=opts.workload or Path(stored["workload_path"]),
            matrix=matrix,
            policy=policy,
            engine=opts.engine or stored["engine"]["engine"],
            model=resolve_model(opts.model or stored["model"]["name"]),
            limit=opts.limit if opts.limit is not None else stored.get("limit"),
            engine_options=opts.engine_options
            if opts.engine_options is not None
            else stored.get("engine_options", {}),
        )
    return Inputs(
        workload=opts.workload,
        matrix=resolve_matrix(opts.matrix or DEFAULT_MATRIX),
        policy=load_policy(opts.policy),
        engine=opts.engine or DEFAULT_ENGINE,
        model=resolve_model(opts.model or DEFAULT_MODEL),
        limit=opts.limit,
        engine_options=opts.engine_options or {},
    )


def _stored_matrix(stored: dict[str, Any], where: str) -> Matrix:
    """The run's matrix, resolved again (a treatment it takes from the catalog may have changed)."""
    if not isinstance(stored.get("matrix_text"), str):
        raise BadInput(f"cannot resume: {where} holds no matrix_text (the matrix the run was started with)")
    try:
        return parse_matrix_text(
            stored["matrix_text"], stored.get("matrix_name", "matrix"), f"{where} matrix"
        )
    except BadInput as exc:
        raise BadInput(f"cannot resume: the matrix in {where} no longer resolves: {exc}") from None


def claim_new_run_dir(run_dir: Path) -> None:
    """Create `run_dir` for a new run; one that already holds anything is refused (a run there is
    continued with --resume, never overwritten)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        held = next(iter(run_dir.iterdir()), None)
    except OSError as exc:
        raise BadInput(f"cannot create the run directory {run_dir}: {exc.strerror or exc}") from None
    if held is None or stopped_before_it_began(run_dir):
        return
    if (run_dir / MANIFEST).exists():
        raise BadInput(
            f"{run_dir} already holds a run: continue it with --resume {run_dir}, or name a new directory"
        )
    raise BadInput(f"{run_dir} is not empty: a new run needs an empty or new directory")


def resume_engine_options(inputs: Inputs, stored: dict[str, Any] | None) -> dict[str, Any]:
    """The options the engine is made with: the run's `-E`, and when resuming, each option whose default
    changed since (the engine table's `resumed_as`) as the stored fingerprint records it, so a run
    resumes on the kernels it started with; the manifest keeps the `-E` given."""
    options = dict(inputs.engine_options)
    if stored is None or stored["engine"].get("engine") != inputs.engine:
        return options
    for name, before in engine_info(inputs.engine).resumed_as:
        options.setdefault(name, stored["engine"].get(name, before))
    return options


def run_job(
    opts: RunOptions,
    executor: Executor,
    progress: Progress | None = None,
    announce: Callable[[Path], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> Path:
    """Run (or resume) the matrix on `executor`; returns the run directory. A policy with
    `sequential = true` generates look by look (`runner.sequential`). `announce(run_dir)` is called
    once the run directory is open, before any generation; `notice(line)` with what the user did not
    choose (the default workload) or should know (a reuse arm over shared prefixes counted as many
    clusters: `shared_prefix_reuse`)."""
    if opts.run_dir is not None and opts.resume is not None:
        raise BadInput("--run-dir names a new run; --resume continues one: give one of them")
    for option, value in (("--engine", opts.engine), ("--model", opts.model), ("--matrix", opts.matrix)):
        if value is not None and not value.strip():
            raise BadInput(f"{option} is empty: name one, or leave the option out for the default")
    stored = read_manifest(opts.resume) if opts.resume is not None else None
    if stored is not None and opts.resume is not None:
        skew = version_skew(opts.resume, stored)
        if skew and notice is not None:
            notice(skew)
    inputs = resolve_inputs(opts, stored)
    if inputs.policy.sequential and executor.joins_cluster:
        raise BadInput(
            f"a sequential policy stops arms between looks, which executor {executor.name!r} (on a cluster's "
            "workers) cannot: run it in this process (leave out --executor)"
        )
    engine_info(inputs.engine)
    if stored is None:  # a resumed run's options were checked when it started; a change is refused below
        check_engine_options(inputs.engine, inputs.engine_options)
    if inputs.limit is not None and not 1 <= inputs.limit <= MAX_CASES:
        raise BadInput(f"--limit must be ≥ 1 and ≤ {MAX_CASES:,}, got {inputs.limit}")
    check_capable(inputs.engine, inputs.matrix)  # from the engine table: before any engine is loaded
    workload_path = inputs.workload or default_workload(inputs.model, inputs.engine, opts.runs_dir)
    workload = read_workload(workload_path)
    if inputs.workload is None and notice is not None:
        notice(
            f"no -w given: gating the default suite {DEFAULT_SUITE!r} ({len(workload.cases)} cases), "
            f"frozen to {workload_path}; name your own workload with -w FILE"
        )
    check_validators(workload.cases, f"workload {workload_path}")
    cases = select_cases(workload, inputs.limit)
    check_run_size(inputs.matrix, len(cases))
    check_policy_slices(inputs.policy, map(case_labels, workload.cases), f"workload {workload_path}")
    if inputs.engine == "fake":
        from kvgate.engines.fake import check_fault_slices

        check_fault_slices(inputs.matrix.faults, cases, f"workload {workload_path}")
    unsafe_reason = check_safe(
        inputs.policy, opts.policy_unsafe_reason or (stored or {}).get("policy_unsafe_reason")
    )
    keyed = ((case_labels(c), c.critical, cluster_key(c, inputs.policy)) for c in cases)
    check_winnable(inputs.policy, keyed)
    identity = {"name": inputs.model.name} if inputs.engine == "fake" else model_identity(inputs.model)

    def manifest_for(engine_fingerprint: dict[str, Any]) -> dict[str, Any]:
        ids = [c.case_id for c in cases]
        manifest = build_manifest(
            workload,
            ids,
            identity,
            engine_fingerprint,
            inputs.matrix,
            inputs.policy,
            inputs.limit,
            inputs.engine_options,
        )
        manifest["policy_unsafe_reason"] = unsafe_reason
        return manifest

    if stored is not None and opts.resume is not None:  # refuse before loading an engine for nothing
        refuse_if_changed(opts.resume, stored, manifest_for({**stored["engine"], "engine": inputs.engine}))
    if inputs.engine != "fake" and any(inputs.matrix.faults.values()):
        raise BadInput(f"matrix {inputs.matrix.name!r} plants [faults]; only --engine fake honours them")
    if not engine_info(inputs.engine).kv_pool and any(
        inputs.matrix.kv_blocks_for(t.name) for t in inputs.matrix.arms()
    ):
        raise BadInput(
            f"matrix {inputs.matrix.name!r} sets kv_blocks; engine {inputs.engine!r} cannot size its KV pool"
        )
    runs = engine_info(inputs.engine).schedules
    unrun = sorted(
        {k for t in inputs.matrix.arms() for k in inputs.matrix.load_for(t.name) if k in SCHEDULE_KEYS}
        - set(runs)
    )
    if unrun:
        where = "server or fake" if "abort_percent" in unrun else "server, fake or vllm"
        raise BadInput(
            f"matrix {inputs.matrix.name!r} sets {', '.join(unrun)}; engine {inputs.engine!r} cannot run "
            f"that stress schedule (it runs {', '.join(runs) or 'none'}): use --engine {where}"
        )
    if engine_info(inputs.engine).loads_weights:
        check_model_folder(inputs.model)
    check_tokenizer(workload_path, workload.meta, inputs.engine, inputs.model)
    warning = shared_prefix_reuse_warning(inputs.matrix, cases, inputs.policy)
    if warning is not None and notice is not None:
        notice(f"warning: {warning}")
    engine = executor.create_engine(inputs.engine, inputs.model, resume_engine_options(inputs, stored))
    try:
        check_applicable(engine, inputs.matrix)
        manifest = manifest_for(engine.fingerprint())
        run_dir = (
            opts.resume if opts.resume is not None else opts.run_dir or opts.runs_dir / manifest["run_id"]
        )
        if opts.resume is None:
            claim_new_run_dir(run_dir)
        try:
            with run_lock(run_dir):
                remove_temp_files(run_dir)
                manifest = open_run(run_dir, manifest)
                if announce is not None:
                    announce(run_dir)
                reconcile(run_dir, manifest["run_id"])
                remove_superseded_parts(run_dir)
                ctx = RunContext(
                    run_dir,
                    manifest,
                    workload,
                    cases,
                    inputs.matrix,
                    inputs.policy,
                    engine,
                    progress or NoProgress(),
                )
                executor.execute(ctx, _sequential() if inputs.policy.sequential else None)
        except KeyboardInterrupt as exc:
            raise RunInterrupted(run_dir) from exc
    finally:
        engine.close()
        thaw()  # what creating the engine froze (engines.collector_pause)
    return run_dir


def _sequential() -> Any:
    """The look-by-look pass driver, imported only for a sequential policy: it brings in the report
    (scipy and the rest), which a run refused before it starts, or a fixed-n run, never needs."""
    from kvgate.runner.sequential import execute_sequential

    return execute_sequential
