"""bench/control_vs_vllm.py's floor arithmetic: decode steps counted from the outputs, prefill FLOPs and a
decode step's bytes from the model's shapes (the measured rates are the bench's; the counting is here)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import control_vs_vllm  # noqa: E402


def _floor(layers: int = 2) -> control_vs_vllm.FloorSide:
    """A FloorSide for a toy model (hidden 8, 2 query heads of 4, 1 KV head, MLP 16, vocab 10)."""
    side = object.__new__(control_vs_vllm.FloorSide)
    side.hidden, side.inner, side.layers, side.vocab = 8, 16, layers, 10
    side.heads, side.kv_heads, side.head_dim = 2, 1, 4
    side.shapes = [(8, 8), (4, 8), (4, 8), (8, 8), (16, 8), (16, 8), (8, 16)]
    side.weights = []
    return side


def test_decode_steps_are_the_forwards_after_the_prefill() -> None:
    cases = [SimpleNamespace(max_new_tokens=12)] * 3
    # ended by EOS after 3 tokens (4 choices: 3 forwards); no tokens (EOS first: none); budget used up
    assert control_vs_vllm.decode_steps([[5, 6, 7], [], list(range(12))], cases) == [3, 0, 11]


def test_prefill_flops_count_projections_causal_attention_and_one_row_of_logits() -> None:
    side = _floor()
    n = 3
    projections = 2 * n * (64 + 32 + 32 + 64 + 128 + 128 + 128) * 2
    attention = 4 * 2 * 4 * (3 + 2 + 1) * 2  # QKᵀ and PV over the 6 causal (query, key) pairs, 2 layers
    assert side.prefill_flops(n) == projections + attention + 2 * 8 * 10


def test_a_decode_step_reads_every_weight_and_the_kv_so_far() -> None:
    import torch

    side = _floor()
    side.weights = [torch.zeros(8, 8), torch.zeros(10, 8)]
    assert side.step_bytes(5) == (64 + 80) * 4 + 2 * 2 * 1 * 4 * 5 * 4
