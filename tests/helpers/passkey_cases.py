"""Short passkey cases frozen for the embedded model's own tokenizer: the few cases the tests of the
engines that run the real model (hf, llamacpp, llama-server) send through an arm."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from kvgate.workload.case import Case


@cache
def passkey_cases(
    folder: Path, length: int, depths: tuple[float, ...], per_cell: int, max_new_tokens: int, seed: int = 0
) -> tuple[Case, ...]:
    """`per_cell` passkey cases per depth of ~`length` prompt tokens (`max_new_tokens` new tokens), from a
    one-generator suite frozen with the tokenizer of the model in `folder` (a safetensors folder)."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer
    from kvgate.workload.suites import parse_suite

    with tempfile.TemporaryDirectory() as scratch:
        spec = Path(scratch) / "tiny.toml"
        spec.write_text(
            'name = "tiny"\n[[generate]]\ngenerator = "passkey"\n'
            f"lengths = [{length}]\ndepths = {list(depths)}\nper_cell = {per_cell}\n"
            f"max_new_tokens = {max_new_tokens}\n"
        )
        suite = parse_suite(spec)
    return tuple(freeze_cases([suite], HFPromptTokenizer.from_folder(folder, "smollm2-135m"), seed=seed))
