"""The bare transformers baseline: greedy generation on a frozen workload's token ids, nothing else.

What a user would write without kvgate: load the model folder with AutoModelForCausalLM, then
`model.generate(ids, do_sample=False, max_new_tokens=…)` case by case (batch size 1, as kvgate's hf
engine runs) — or, leaner still, `greedy_loop`: prefill, then one forward per token on a DynamicCache,
argmax, nothing more. No validation, no storage, no logprobs. It imports nothing from kvgate.

    .venv/bin/python bench/bare_hf.py WORKLOAD.parquet MODEL_FOLDER [--limit N] [--loop]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Prompt = tuple[list[int], int]
"""(prompt token ids, max_new_tokens)"""


def read_prompts(workload: Path, limit: int | None = None) -> list[Prompt]:
    """Token ids and output budget of each case, in workload order (`limit`: spread evenly, as kvgate)."""
    import pyarrow.parquet as pq

    table = pq.read_table(workload, columns=["prompt_token_ids", "max_new_tokens"]).to_pydict()
    prompts = list(zip(table["prompt_token_ids"], table["max_new_tokens"], strict=True))
    if limit is None or limit >= len(prompts):
        return prompts
    step = len(prompts) / limit
    return [prompts[int(i * step)] for i in range(limit)]


def load_model(folder: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    return model.eval()


def eos_ids(model: Any) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [eos])


def generate_all(model: Any, prompts: Sequence[Prompt]) -> list[list[int]]:
    """Greedy outputs (end-of-sequence token dropped, as kvgate stores them), one case at a time."""
    import torch

    stop = eos_ids(model)
    outputs = []
    with torch.inference_mode():
        for ids, max_new in prompts:
            prompt = torch.tensor([ids])
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=max_new,
                pad_token_id=model.generation_config.pad_token_id,
            )
            tokens = out[0, prompt.shape[1] :].tolist()
            outputs.append(tokens[:-1] if tokens and tokens[-1] in stop else tokens)
    return outputs


def greedy_loop(model: Any, prompts: Sequence[Prompt]) -> list[list[int]]:
    """The least a greedy decoder can do: prefill, then argmax and one forward per new token."""
    import torch
    from transformers import DynamicCache

    stop = eos_ids(model)
    outputs = []
    with torch.inference_mode():
        for ids, max_new in prompts:
            cache = DynamicCache(config=model.config)
            logits = model(input_ids=torch.tensor([ids]), past_key_values=cache, logits_to_keep=1).logits
            tokens: list[int] = []
            for step in range(max_new):
                token = int(logits[0, -1].argmax())
                if token in stop:
                    break
                tokens.append(token)
                if step + 1 < max_new:
                    logits = model(input_ids=torch.tensor([[token]]), past_key_values=cache).logits
            outputs.append(tokens)
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", type=Path)
    parser.add_argument("model_folder", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--loop", action="store_true", help="the plain greedy loop, not model.generate")
    args = parser.parse_args()
    prompts = read_prompts(args.workload, args.limit)
    start = time.perf_counter()
    model = load_model(args.model_folder)
    loaded = time.perf_counter()
    outputs = (greedy_loop if args.loop else generate_all)(model, prompts)
    done = time.perf_counter()
    print(json.dumps({"cases": len(prompts), "load_s": loaded - start, "generate_s": done - loaded,
                      "output_tokens": sum(map(len, outputs))}))  # fmt: skip


if __name__ == "__main__":
    main()
