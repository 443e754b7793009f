"""A prompt's prefill on an empty cache as a flat run of tensor ops, bit-identical to the modules', its
last layer computed only for the positions the logits read.

Through transformers' modules a prefill computes every layer for every prompt position, the last one
too, though only the last position's output reaches the logits (logits_to_keep = 1): the last layer's
queries, attention, output projection and MLP at the other positions are thrown away (≈3% of a
1,011-token prefill's FLOPs on the embedded model's 30 layers). `prefill` runs the decode step's flat ops
(decode_step: F.rms_norm, the rotary embedding as x·cos + roll(x, D/2)·sin±, in-place residual additions
and SiLU(gate)·up) on all positions up to the last layer's keys and values, which the cache needs for
every position, and computes the rest of the last layer only for its tail (`tail_start`):

- attention onednn_attention's: from the start of the attention block that holds the last two positions
  (attend_blocks with `first`: the same blocks, products and sums the whole computation runs for them);
- attention SDPA's (the default on CPUs without AVX-512): attention for every position, as transformers
  calls it for a causal prompt with no mask (`F.scaled_dot_product_attention(…, is_causal=True,
  enable_gqa=True)`, whose rows do not depend on one another), then the output projection and MLP for
  the last two positions only.

Its logits and the cache entries it writes equal the modules' bit for bit
(tests/engines/hf/test_prefill_step.py), given that a product's row is the same floats whatever rows are
computed with it — which holds for oneDNN's packed projections of two rows or more (the down projection
of a single row takes another kernel, so the tail keeps at least two).

It applies (`applies`) only where that holds: a decode step's model conditions (decode_step.
unhooked_llama: no hook, no forward replaced), attention onednn_attention's or SDPA's, every projection
packed for many rows (onednn_linear.is_packed), an empty cache and the prompt at position 0 (no mask:
causal). Anything else — eager attention, torch's nn.Linear, a prefill chunk after cached entries, a
hook that captures queries — goes through the modules.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from kvgate.engines.hf.decode_step import _rms_norm, unhooked_llama
from kvgate.engines.hf.onednn_attention import NAME as ONEDNN_ATTENTION
from kvgate.engines.hf.onednn_attention import attend_blocks, block_queries
from kvgate.engines.hf.onednn_linear import is_packed

ATTENTIONS = ("sdpa", ONEDNN_ATTENTION)
"""The attention implementations the flat prefill computes as the modules do."""
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


def applies(model: Any, ids: torch.Tensor, cache: Any, first_position: int) -> bool:
    """Whether `prefill(model, ids, cache)` is the modules' forward exactly: two positions or more per
    row from position 0 into an empty cache, on a model `unhooked_llama` accepts, with attention SDPA's
    or oneDNN's blocked one and packed projections (checked at every call, as hooks are)."""
    if ids.dim() != 2 or ids.shape[1] < 2 or ids.device.type != "cpu" or first_position != 0:
        return False
    if model.config._attn_implementation not in ATTENTIONS or cache.get_seq_length() != 0:
        return False
    if not unhooked_llama(model):
        return False
    layers = model.model.layers[: model.config.num_hidden_layers]
    return all(is_packed(getattr(layer.self_attn, p)) for layer in layers for p in PROJECTIONS) and all(
        is_packed(getattr(layer.mlp, p)) for layer in layers for p in MLP
    )


def prefill(model: Any, ids: torch.Tensor, cache: Any) -> torch.Tensor:
    """ids [B, n] at positions 0…n−1 into the empty `cache` (entries appended for every position) → the
    last position's logits [B, 1, vocab], for a model `applies` accepts."""
    inner, config = model.model, model.config
    b, n = ids.shape
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    hidden = inner.embed_tokens.forward(ids)  # [B, n, H], a tensor of its own (added to in place)
    cos, sin = inner.rotary_emb.forward(hidden, torch.arange(n, device=ids.device).unsqueeze(0))
    d = cos.shape[-1]
    half = d // 2
    cos = cos.unsqueeze(2)  # [1, n, 1, D]: broadcast over heads, the projections' [B, n, heads, D]
    signed_sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(2)
    layers = inner.layers[: config.num_hidden_layers]
    blocked = config._attn_implementation == ONEDNN_ATTENTION
    tail = tail_start(n, block_queries(heads // kv_heads, n) if blocked else 1)  # the last layer's rows
    for index, layer in enumerate(layers):
        attention, mlp = layer.self_attn, layer.mlp
        last = index == len(layers) - 1
        x = _rms_norm(layer.input_layernorm, hidden)
        q = attention.q_proj.forward(x).view(b, n, heads, d)
        k = attention.k_proj.forward(x).view(b, n, kv_heads, d)
        v = attention.v_proj.forward(x).view(b, n, kv_heads, d)
        q = q * cos + q.roll(half, -1) * signed_sin
        k = k * cos + k.roll(half, -1) * signed_sin
        keys, values = cache.update(k.transpose(1, 2), v.transpose(1, 2), index)  # [B, Hkv, n, D]
        first = tail if last else 0
        if blocked:
            attended = attend_blocks(q.transpose(1, 2), keys, values, attention.scaling, first=first)
        else:  # transformers' SDPA call for a causal prompt, no mask: [B, Hq, n, D] → rows first…n−1
            attended = F.scaled_dot_product_attention(
                q.transpose(1, 2), keys[:, :, :n], values[:, :, :n], scale=attention.scaling, is_causal=True,
                enable_gqa=heads != kv_heads,
            ).transpose(1, 2)[:, first:].contiguous()  # fmt: skip
        if last:
            hidden = hidden[:, tail:]  # [B, n − tail, H]
        rows = n - first
        hidden.add_(attention.o_proj.forward(attended.view(b, rows, heads * d)))
        x = _rms_norm(layer.post_attention_layernorm, hidden)
        gate = F.silu(mlp.gate_proj.forward(x), inplace=True)
        hidden.add_(mlp.down_proj.forward(gate.mul_(mlp.up_proj.forward(x))))
    logits: torch.Tensor = model.lm_head.forward(_rms_norm(inner.norm, hidden[:, -1:]))
    return logits


def tail_start(n: int, block: int) -> int:
    """The first of the n prompt positions the last layer computes past its keys and values: the start
    of the `block`-aligned block holding the last two positions (block 1: the last two alone)."""
    return ((n - 2) // block) * block
