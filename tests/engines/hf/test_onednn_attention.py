"""`-E attention=onednn`: the causal prefill in blocks of oneDNN products. Its outputs stay within float32
rounding of torch's SDPA (grouped and plain heads, several lengths, blocks that end inside the prompt),
whatever the strides transformers and the preallocated cache hand it; everything but a maskless causal
prefill is SDPA's own result; bad options are refused in one line; and on the embedded model the
control, a query-capturing, a per-head-budgeted and a certified eviction give the default's tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hf_engine_support import one_thread, passkey_cases, run_arm

from kvgate.engines.hf import onednn_attention
from kvgate.engines.hf.onednn_attention import attention_forward, causal_blocks
from kvgate.errors import BadInput
from kvgate.treatments.spec import Eviction, Full

pytestmark = pytest.mark.skipif(not onednn_attention.available(), reason="torch built without oneDNN")

BOUND = 5e-6
"""Largest |difference| from SDPA allowed on unit-normal inputs (measured ≤ 7e-7 at 300–4,096 tokens)."""


class _Module:
    """What the attention function reads of transformers' attention module."""

    is_causal = True

    def __init__(self, groups: int) -> None:
        self.num_key_value_groups = groups


def _inputs(b: int, hq: int, hkv: int, n: int, d: int = 64) -> tuple[torch.Tensor, ...]:
    """Queries laid out as transformers makes them ([B, n, Hq, D] memory seen as [B, Hq, n, D])."""
    query = torch.randn(b, n, hq, d).transpose(1, 2)
    return query, torch.randn(b, hkv, n, d), torch.randn(b, hkv, n, d)


def _sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(query, key, value, is_causal=True).transpose(1, 2)


@pytest.mark.parametrize(
    ("b", "hq", "hkv", "n", "block"),
    [
        (1, 9, 3, 300, 128),  # the embedded model's heads; the last block is partial
        (2, 9, 3, 257, 64),  # two rows
        (1, 4, 4, 129, 128),  # no grouping; a block of one position at the end
        (1, 6, 2, 2, 128),  # the shortest prompt this path takes
        (1, 9, 3, 1011, 128),  # a smoke case's length
    ],
)
def test_blocks_match_sdpa_within_float32_rounding(
    b: int, hq: int, hkv: int, n: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(n)
    monkeypatch.setattr(onednn_attention, "BLOCK_QUERIES", block)
    query, key, value = _inputs(b, hq, hkv, n)
    got = causal_blocks(query, key, value, 64**-0.5)
    want = _sdpa(query, key, value)
    assert got.shape == (b, n, hq, 64) and got.is_contiguous()
    assert (got - want).abs().max().item() < BOUND


def test_the_score_bound_shrinks_blocks_and_changes_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    query, key, value = _inputs(1, 9, 3, 200)
    whole = causal_blocks(query, key, value, 0.125)
    monkeypatch.setattr(onednn_attention, "SCORE_ELEMENTS", 3 * 200 * 7)  # blocks of 7 positions
    small = causal_blocks(query, key, value, 0.125)
    assert (small - whole).abs().max().item() < BOUND
    assert (small - _sdpa(query, key, value)).abs().max().item() < BOUND


def test_cache_views_and_a_static_caches_empty_slots_are_read_as_they_are() -> None:
    """Keys and values as the preallocated cache hands them (views of a longer buffer), and keys past
    the prompt with no mask (an empty static cache's slots), which SDPA drops too."""
    torch.manual_seed(2)
    query, key, value = _inputs(1, 9, 3, 150)
    buffers = [torch.zeros(1, 3, 400, 64) for _ in range(2)]
    buffers[0][:, :, :150], buffers[1][:, :, :150] = key, value
    module = _Module(3)
    got, weights = attention_forward(module, query, buffers[0], buffers[1], None, scaling=0.125)
    assert weights is None
    assert torch.equal(got, causal_blocks(query, key.contiguous(), value.contiguous(), 0.125))
    assert torch.equal(got, attention_forward(module, query, buffers[0][:, :, :150], buffers[1][:, :, :150],
                                              None, scaling=0.125)[0])  # fmt: skip


@pytest.mark.parametrize("case", ["decode step", "mask", "float64", "dropout"])
def test_everything_but_a_maskless_causal_prefill_is_sdpas(case: str) -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(3)
    query, key, value = _inputs(1, 9, 3, 40)
    mask: Any = None
    dropout = 0.0
    if case == "decode step":
        query = query[:, :, -1:]
    elif case == "mask":
        mask = torch.ones(1, 1, 40, 40, dtype=torch.bool).tril_()
        mask[..., 3] = False
    elif case == "float64":
        query, key, value = query.double(), key.double(), value.double()
    else:
        dropout = 0.5
    module = _Module(3)
    torch.manual_seed(4)
    got, _ = attention_forward(module, query, key, value, mask, dropout=dropout, scaling=0.125)
    torch.manual_seed(4)
    want, _ = sdpa_attention_forward(module, query, key, value, mask, dropout=dropout, scaling=0.125)  # type: ignore[arg-type]
    assert torch.equal(got, want)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"attention": "flash"}, "attention must be one of"),
        ({"attention": "onednn", "dtype": "bfloat16"}, "float32"),
    ],
)
def test_bad_attention_options_are_refused_before_loading(options: dict[str, Any], named: str) -> None:
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    with pytest.raises(BadInput, match=named):
        HFEngine(resolve_model("smollm2-135m"), **options)


def test_onednn_attention_gives_the_defaults_tokens_on_the_embedded_model(model_folder: Path) -> None:
    from hf_engine_support import shared_engine

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    cases = list(passkey_cases(model_folder, (0.2, 0.8), 1, 0))
    arms = [
        Full("full"),
        Eviction("snapkv-50", method="snapkv", ratio=0.5, window=16),  # captures prefill queries
        Eviction("adakv-50", method="adakv", ratio=0.5, window=16),  # per-head mask on later steps
        Eviction("streaming-cert", method="streaming", ratio=0.5, certificate=True),
    ]
    with one_thread():
        default = shared_engine()
        onednn = HFEngine(resolve_model("smollm2-135m"), attention="onednn")
        assert onednn.fingerprint()["attn_implementation"] == onednn_attention.NAME
        assert onednn.fingerprint()["attention"] == "onednn" and "attention" not in default.fingerprint()
        assert default.fingerprint()["attn_implementation"] == "sdpa"
        for arm in arms:
            want = [g.output_token_ids for g in run_arm(default, arm, cases)]
            got = [g.output_token_ids for g in run_arm(onednn, arm, cases)]
            assert got == want and all(want), arm.name
