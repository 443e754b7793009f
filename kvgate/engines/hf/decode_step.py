"""One decode step of a Llama-family model as a flat run of tensor ops, bit-identical to its modules'.

A decode step ([B, 1] token ids) through transformers' modules is ≈400 module calls and ≈1,500 kernels,
most of them on a few hundred floats: the keyword plumbing of every layer, the causal-mask builder, six
kernels per RMSNorm, ten per rotary embedding. `decode_step` computes the same step from the same
parameters with the same reductions, so its logits and the cache entries it appends equal the modules'
bit for bit (tests/engines/hf/test_decode_step.py):

- every projection and the head is its module's own forward (oneDNN's packed product or nn.Linear);
- RMSNorm (Zhang & Sennrich, 2019, arXiv:1910.07467) is `F.rms_norm`, on float32 the same sums as
  transformers' pow / mean / rsqrt;
- the rotary embedding (Su et al., 2021, arXiv:2104.09864) is x·cos + roll(x, D/2)·sin± with
  sin± = (−sin₁, sin₂): rotate_half(x)·sin elementwise, negation being exact;
- attention is `F.scaled_dot_product_attention` on the cache's keys and values, as transformers calls it
  for one query row and no mask (onednn_attention hands such a row to it too);
- the residual additions and SiLU(gate)·up are made in place (elementwise: the same values).

It applies (`applies`) only where that holds: float32 on CPU, transformers' Llama classes with a SiLU
MLP, attention SDPA's or onednn_attention's, and no hook on any module nor a forward replaced (query
capture, the attention-error certificate and head masks see each call through the modules, which then
run the step). The head reads the one position a decode step has (logits_to_keep = 1).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from kvgate.engines.hf.onednn_attention import NAME as ONEDNN_ATTENTION

ATTENTIONS = ("sdpa", ONEDNN_ATTENTION)
"""The attention implementations whose decode step is SDPA's on the whole cache."""

_MODULES: weakref.WeakKeyDictionary[nn.Module, tuple[nn.Module, ...] | None] = weakref.WeakKeyDictionary()
"""Per model: every module whose hooks would see the step, or None when the step does not apply to it."""


def applies(model: Any, ids: torch.Tensor) -> bool:
    """Whether `decode_step(model, ids, …)` is the modules' step exactly: one position per row, a Llama
    model in float32 on CPU, no hook installed (a hook added later is seen: checked at every call)."""
    if ids.dim() != 2 or ids.shape[1] != 1 or ids.device.type != "cpu":
        return False
    return model.config._attn_implementation in ATTENTIONS and unhooked_llama(model)


def unhooked_llama(model: Any) -> bool:
    """Whether `model` is one the flat ops compute exactly (transformers' Llama classes with a SiLU MLP,
    float32 on CPU, in eval mode) and no hook is on any of its modules nor a forward replaced but a
    projection's (the flat prefill's condition too: prefill_step)."""
    if model.training:
        return False
    try:
        modules = _MODULES[model]
    except KeyError:
        modules = _MODULES[model] = _flat_modules(model)
    if modules is None:
        return False
    module_hooks = nn.modules.module
    if module_hooks._global_forward_hooks or module_hooks._global_forward_pre_hooks:
        return False
    return not any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _flat_modules(model: Any) -> tuple[nn.Module, ...] | None:
    """The modules a flat step stands for, or None if the model is not one it computes exactly."""
    from transformers.models.llama import modeling_llama as llama

    inner = getattr(model, "model", None)
    if not isinstance(model, llama.LlamaForCausalLM) or not isinstance(inner, llama.LlamaModel):
        return None
    config = model.config
    layers: list[Any] = list(inner.layers[: config.num_hidden_layers])
    if config.hidden_act != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return None
    embedding = inner.embed_tokens.weight
    if embedding.dtype != torch.float32 or embedding.device.type != "cpu":
        return None
    norm = llama.LlamaRMSNorm
    kinds = (llama.LlamaDecoderLayer, llama.LlamaAttention, llama.LlamaMLP, norm, norm)
    parts: list[nn.Module] = [model, inner, inner.embed_tokens, inner.rotary_emb, inner.norm, model.lm_head]
    for layer in layers:
        own: list[nn.Module] = [
            layer,
            layer.self_attn,
            layer.mlp,
            layer.input_layernorm,
            layer.post_attention_layernorm,
        ]
        if not all(isinstance(m, k) for m, k in zip(own, kinds, strict=True)):
            return None
        if layer.self_attn.head_dim > 256:  # transformers then repeats the keys instead of SDPA's GQA
            return None
        parts += own + list(layer.self_attn.children()) + list(layer.mlp.children())
    if not isinstance(inner.norm, norm) or any("forward" in vars(m) for m in parts if not _linear(m)):
        return None
    return tuple(parts)


def _linear(module: nn.Module) -> bool:
    """Whether `module` is a projection, whose forward the step calls (packed or not)."""
    return isinstance(module, nn.Linear)


def decode_step(model: Any, ids: torch.Tensor, cache: Any, position: int) -> torch.Tensor:
    """ids [B, 1] at true position `position` against `cache` (its entries appended) → logits [B, 1, vocab],
    for a model `applies` accepts."""
    inner, config = model.model, model.config
    b = ids.shape[0]
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    hidden = inner.embed_tokens.forward(ids)  # [B, 1, H], a tensor of its own (added to in place)
    positions = torch.tensor([[position]], device=ids.device)
    cos, sin = inner.rotary_emb.forward(hidden, positions)  # [1, 1, D] each
    d = cos.shape[-1]
    half = d // 2
    cos = cos.unsqueeze(1)  # [1, 1, 1, D]: broadcast over heads
    signed_sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(1)
    for index, layer in enumerate(inner.layers[: config.num_hidden_layers]):
        attention, mlp = layer.self_attn, layer.mlp
        x = _rms_norm(layer.input_layernorm, hidden)
        q = attention.q_proj.forward(x).view(b, 1, heads, d).transpose(1, 2)  # [B, Hq, 1, D]
        k = attention.k_proj.forward(x).view(b, 1, kv_heads, d).transpose(1, 2)  # [B, Hkv, 1, D]
        v = attention.v_proj.forward(x).view(b, 1, kv_heads, d).transpose(1, 2)
        q = q * cos + q.roll(half, -1) * signed_sin
        k = k * cos + k.roll(half, -1) * signed_sin
        keys, values = cache.update(k, v, index)  # [B, Hkv, n, D]
        attended = F.scaled_dot_product_attention(
            q, keys, values, scale=attention.scaling, enable_gqa=heads != kv_heads
        )  # [B, Hq, 1, D]
        hidden.add_(attention.o_proj.forward(attended.transpose(1, 2).reshape(b, 1, heads * d)))
        x = _rms_norm(layer.post_attention_layernorm, hidden)
        gate = F.silu(mlp.gate_proj.forward(x), inplace=True)
        hidden.add_(mlp.down_proj.forward(gate.mul_(mlp.up_proj.forward(x))))
    logits: torch.Tensor = model.lm_head.forward(_rms_norm(inner.norm, hidden))
    return logits


def _rms_norm(norm: Any, x: torch.Tensor) -> torch.Tensor:
    weight = norm.weight
    return F.rms_norm(x, weight.shape, weight, norm.variance_epsilon)
