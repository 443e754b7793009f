"""Shared by the certificate benchmarks: the embedded model's engine and cases of shipped suites frozen
for its tokenizer, a seeded sample of them with prompts up to a length and outputs capped."""

from __future__ import annotations

import dataclasses
import random

import torch

from kvgate.engines.hf.engine import HFEngine
from kvgate.models import model_folder, resolve_model
from kvgate.workload.case import Case
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.hf_tokenizer import HFPromptTokenizer
from kvgate.workload.suites import resolve_suite

MODEL = "smollm2-135m"


def engine(device: str = "cpu", random_weights: bool = False, dtype: str = "float32") -> HFEngine:
    """The hf engine on the embedded model in `dtype`; with `random_weights`, its model rebuilt from the
    same config with freshly initialised weights (seeded), for machines the weights cannot reach."""
    built = HFEngine(resolve_model(MODEL), device=device, dtype=dtype)
    if random_weights:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        built.model = (
            AutoModelForCausalLM.from_config(built.model.config)
            .to(device=built.device, dtype=getattr(torch, dtype))
            .eval()
        )
    return built


def sample_cases(suite: str, count: int, max_prompt: int, max_new: int, seed: int = 0) -> list[Case]:
    """`count` cases of `suite` with at most `max_prompt` prompt tokens, drawn with `seed`, each allowed at
    most `max_new` new tokens."""
    tok = HFPromptTokenizer.from_folder(model_folder(resolve_model(MODEL)), MODEL)
    cases = [
        c for c in freeze_cases([resolve_suite(suite)], tok, seed) if (c.n_prompt_tokens or 0) <= max_prompt
    ]
    chosen = random.Random(seed).sample(cases, min(count, len(cases)))
    return [dataclasses.replace(c, max_new_tokens=min(c.max_new_tokens, max_new)) for c in chosen]
