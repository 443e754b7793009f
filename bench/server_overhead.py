"""kvgate's server engine against a bare async client: the same completions requests, to the same server,
at concurrency 1 and 8, side by side (repetitions alternate which goes first).

kvgate's side is a server-engine session (given endpoint) generating the cases: request bodies with the
frozen prompt token ids, bounded in flight, answers read strictly, counters checked. The bare side is
httpx's AsyncClient posting the same bodies under a semaphore and decoding the JSON. The server is the
test stub (`tests/engines/server/stub_server.py`, in a process of its own, answering after `--latency-s`)
so it runs anywhere; with `--real`, also a `vllm serve` of the embedded model launched by kvgate.

    .venv/bin/python bench/server_overhead.py [--quick] [--real [--real-cases N] [--real-reps R]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import common
import httpx

from kvgate.engines.base import ArmSetup
from kvgate.engines.fake import reference_answer
from kvgate.engines.server.engine import ServerEngine
from kvgate.engines.server.launch import free_port
from kvgate.engines.server.tls import tls_context
from kvgate.models import resolve_model
from kvgate.treatments.spec import Full
from kvgate.workload.case import Case
from kvgate.workload.freeze import freeze
from kvgate.workload.schema import read_workload
from kvgate.workload.tokenizer import WordTokenizer

STUB_DIR = common.REPO_ROOT / "tests" / "engines" / "server"
sys.path.insert(0, str(STUB_DIR))
from stub_server import answer_key  # noqa: E402

CONCURRENCY = (1, 8)


def bare_bodies(cases: Sequence[Case], model: str, salt: str) -> list[dict[str, Any]]:
    return [
        {"model": model, "prompt": list(c.prompt_token_ids or ()), "max_tokens": c.max_new_tokens,
         "temperature": 0.0, "cache_salt": salt, "return_token_ids": True, "logprobs": 1}
        for c in cases
    ]  # fmt: skip


async def bare_pass(url: str, bodies: list[dict[str, Any]], concurrency: int) -> list[list[int]]:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=600.0, limits=limits, verify=tls_context()) as client:

        async def one(body: dict[str, Any]) -> list[int]:
            async with gate:
                response = await client.post(f"{url}/v1/completions", json=body)
                return list(response.json()["choices"][0]["token_ids"])

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def kvgate_pass(model_dir: Path, url: str, cases: Sequence[Case], concurrency: int, rep: int) -> float:
    engine = ServerEngine(resolve_model(str(model_dir)), endpoints={"*": url})
    setup = ArmSetup("full", 0, Full("full"), f"kvgate-ns:bench:full:r{rep}:a0", concurrency=concurrency)
    session = engine.open(setup)
    try:
        start = time.perf_counter()
        generations = session.generate(cases)
        wall = time.perf_counter() - start
    finally:
        session.close()
    assert all(g.error is None for g in generations), [g.error for g in generations if g.error][:1]
    return wall


def measure(model_dir: Path, url: str, model_id: str, cases: Sequence[Case], reps: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for concurrency in CONCURRENCY:
        walls: dict[str, list[float]] = {"kvgate": [], "bare": []}
        for rep in range(reps):
            order = ("kvgate", "bare") if rep % 2 == 0 else ("bare", "kvgate")
            for side in order:
                if side == "kvgate":
                    walls[side].append(kvgate_pass(model_dir, url, cases, concurrency, rep))
                else:
                    bodies = bare_bodies(cases, model_id, f"kvgate-ns:bench:bare:r{rep}:c{concurrency}")
                    start = time.perf_counter()
                    asyncio.run(bare_pass(url, bodies, concurrency))
                    walls[side].append(time.perf_counter() - start)
        k, b = statistics.median(walls["kvgate"]), statistics.median(walls["bare"])
        out[str(concurrency)] = {"kvgate_s": k, "bare_s": b, "ratio": k / b, "walls": walls}
    return out


def wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2.0, verify=tls_context()).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"server at {url} not ready within {timeout_s} s")


def stub_run(folder: Path, n_cases: int, reps: int, latency_s: float) -> dict[str, Any]:
    workload = folder / "smoke.words.parquet"
    freeze(["smoke"], workload, WordTokenizer(), seed=0)
    cases = read_workload(workload).cases
    cases = tuple(cases[i % len(cases)] for i in range(n_cases))
    answers = folder / "answers.json"
    answers.write_text(
        json.dumps({answer_key(list(c.prompt_token_ids or ())): reference_answer(c) for c in cases})
    )
    model_dir = folder / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    port = free_port()
    argv = [sys.executable, str(STUB_DIR / "stub_server.py"), "--port", str(port), "--answers", str(answers),
            "--latency-s", str(latency_s)]  # fmt: skip
    server = subprocess.Popen(argv)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 30)
        return measure(model_dir, url, "stub", cases, reps)
    finally:
        server.terminate()
        server.wait(10)


def real_run(folder: Path, n_cases: int, reps: int) -> dict[str, Any]:
    """`vllm serve` of the embedded model (launched as the server engine launches the control's)."""
    from kvgate.engines.server.flags import server_flags
    from kvgate.engines.server.launch import HOST, LaunchedServer, fill_template
    from kvgate.engines.vllm.args import arm_args
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer

    engine = ServerEngine(resolve_model("smollm2-135m"))
    assert engine.model_path is not None
    workload = folder / "smoke.model.parquet"
    freeze(["smoke"], workload, HFPromptTokenizer.from_folder(engine.model_path, "smollm2-135m"), seed=0)
    cases = read_workload(workload).cases[:n_cases]
    port = free_port()
    values = {
        "model": str(engine.model_path),
        "host": HOST,
        "port": str(port),
        "vllm": "vllm",
        "python": sys.executable,
    }
    flags = server_flags(arm_args(engine.base_args, Full("full"), engine.offload_gib))
    server = LaunchedServer(
        fill_template(engine.template, values, flags),
        folder / "server.log",
        dict(os.environ),
        "bench",
    )
    url = f"http://{HOST}:{port}"
    model_id = server.start(url, 1800)
    try:
        return measure(engine.model_path, url, model_id, cases, reps)
    finally:
        server.stop(20)


def markdown(results: dict[str, Any], argv: Sequence[str], load: str, runs: tuple[int, int, int, int]) -> str:
    cases, reps, real_cases, real_reps = runs
    rows = []
    for server, by_c in results.items():
        for c, r in by_c.items():
            rows.append([server, c, f"{r['kvgate_s']:.3f}", f"{r['bare_s']:.3f}", f"{r['ratio']:.3f}×"])
    return (
        "## Server engine overhead (kvgate vs a bare async client)\n\n"
        + common.provenance(argv, load)
        + f"- requests: {cases} stub cases (smoke, word tokens) per pass, {reps} repetitions; {real_cases} "
        f"smoke cases for the real server, {real_reps} repetitions; median wall of alternate runs\n\n"
        + common.table(["server", "concurrency", "kvgate s", "bare s", "kvgate / bare"], rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--real", action="store_true", help="also a launched `vllm serve` of the embedded model"
    )
    parser.add_argument("--latency-s", type=float, default=0.02, help="the stub's time per answer")
    parser.add_argument("--real-cases", type=int, default=None, help="smoke cases per real pass (24)")
    parser.add_argument("--real-reps", type=int, default=None, help="repetitions on the real server (3)")
    args = parser.parse_args()
    load = common.load_average()
    n, reps = (48, 3) if args.quick else (192, 5)
    real_n, real_reps = (8, 1) if args.quick else (24, 3)
    real_n, real_reps = args.real_cases or real_n, args.real_reps or real_reps
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-") as tmp:
        results["stub"] = stub_run(Path(tmp), n, reps, args.latency_s)
        if args.real:
            results["vllm serve (CPU)"] = real_run(Path(tmp), real_n, real_reps)
    text = markdown(
        results, sys.argv, load, (n, reps, real_n if args.real else 0, real_reps if args.real else 0)
    )
    print(text)
    common.write_section("server_overhead", text, results)


if __name__ == "__main__":
    main()
