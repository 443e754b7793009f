"""The bare vLLM baseline: `vllm.LLM.generate` on a frozen workload's token ids, nothing else.

Greedy (temperature 0), the case's max_new_tokens, requests submitted in chunks of `batch_size` (as
kvgate submits a batch), no logprobs unless asked, no validation, no storage. The engine arguments are
given as JSON (the harness benchmark passes the ones kvgate's control arm uses, so both make the same
generations); vLLM's environment variables are whatever the process has. It imports nothing from kvgate.

    .venv/bin/python bench/bare_vllm.py WORKLOAD.parquet '{"model": "…", "dtype": "float32", …}'
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bare_hf import Prompt, read_prompts


def start_llm(engine_args: dict[str, Any]) -> Any:
    from vllm import LLM

    return LLM(**engine_args)


def stop_llm(llm: Any) -> None:
    """End the engine-core process so its memory is free before the next LLM starts."""
    try:
        llm.llm_engine.engine_core.shutdown()
    finally:
        del llm
        gc.collect()


def generate_all(
    llm: Any, prompts: Sequence[Prompt], batch_size: int, eos: set[int], logprobs: int | None = None
) -> list[list[int]]:
    """Greedy outputs (end-of-sequence token dropped, as kvgate stores them); `logprobs` as vLLM takes it."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    outputs = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        requests = [TokensPrompt(prompt_token_ids=list(ids)) for ids, _ in chunk]
        params = [SamplingParams(temperature=0.0, max_tokens=n, logprobs=logprobs) for _, n in chunk]
        for out in llm.generate(requests, params, use_tqdm=False):
            tokens = list(out.outputs[0].token_ids)
            outputs.append(tokens[:-1] if tokens and tokens[-1] in eos else tokens)
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", type=Path)
    parser.add_argument("engine_args", help="vllm.LLM keyword arguments as JSON")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--eos", type=int, action="append", default=[2])
    args = parser.parse_args()
    prompts = read_prompts(args.workload, args.limit)
    start = time.perf_counter()
    llm = start_llm(json.loads(args.engine_args))
    loaded = time.perf_counter()
    outputs = generate_all(llm, prompts, args.batch_size, set(args.eos))
    done = time.perf_counter()
    stop_llm(llm)
    print(json.dumps({"cases": len(prompts), "load_s": loaded - start, "generate_s": done - loaded,
                      "output_tokens": sum(map(len, outputs))}))  # fmt: skip


if __name__ == "__main__":
    main()
