"""`-E attention=onednn`: prefill chunks in blocks of oneDNN products. Its outputs stay within float32
rounding of torch's SDPA (grouped and plain heads, several lengths, blocks that end inside the prompt),
whatever the strides transformers and the preallocated cache hand it, and with each mask a prefill chunk
gets (cached entries before it, a budgeted eviction's per-head mask, left padding, a query that sees
nothing); a decode step and anything else is SDPA's own result; bad options are refused in one line;
and on the embedded model six arms, reuse and a context-scoped eviction among them, give SDPA's tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hf_engine_support import one_thread, passkey_cases, run_arm

from kvgate.engines.hf import onednn_attention
from kvgate.engines.hf.onednn_attention import attend_blocks, attention_forward
from kvgate.errors import BadInput
from kvgate.treatments.spec import Eviction, Full, Reuse

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
    got = attend_blocks(query, key, value, 64**-0.5)
    want = _sdpa(query, key, value)
    assert got.shape == (b, n, hq, 64) and got.is_contiguous()
    assert (got - want).abs().max().item() < BOUND


def test_the_score_bound_shrinks_blocks_and_changes_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    query, key, value = _inputs(1, 9, 3, 200)
    whole = attend_blocks(query, key, value, 0.125)
    monkeypatch.setattr(onednn_attention, "SCORE_ELEMENTS", 3 * 200 * 7)  # blocks of 7 positions
    small = attend_blocks(query, key, value, 0.125)
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
    assert torch.equal(got, attend_blocks(query, key.contiguous(), value.contiguous(), 0.125))
    assert torch.equal(got, attention_forward(module, query, buffers[0][:, :, :150], buffers[1][:, :, :150],
                                              None, scaling=0.125)[0])  # fmt: skip


@pytest.mark.parametrize("case", ["decode step", "mask of another shape", "float64", "dropout"])
def test_everything_but_a_prefill_chunk_is_sdpas(case: str) -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(3)
    query, key, value = _inputs(1, 9, 3, 40)
    mask: Any = None
    dropout = 0.0
    if case == "decode step":
        query = query[:, :, -1:]
    elif case == "mask of another shape":
        mask = torch.ones(1, 40, 40, dtype=torch.bool).tril_()
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


def _causal_after(b: int, n: int, past: int) -> torch.Tensor:
    """transformers' bool mask [b, 1, n, past + n] for a chunk of n queries after `past` cached entries."""
    rows = torch.arange(n).unsqueeze(1) + past
    return (torch.arange(past + n).unsqueeze(0) <= rows).expand(b, 1, n, past + n).clone()


def _masked(kind: str) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """(query, key, value) and the attention mask transformers hands a prefill chunk of each kind."""
    from kvgate.engines.hf.eviction.head_mask import head_mask

    if kind == "prefix reuse":  # 3 reused blocks of 16, the rest of a 300-token prompt computed
        past, n, b = 48, 252, 1
    elif kind == "question after eviction":  # 120 kept context entries, a 37-token question
        past, n, b = 120, 37, 1
    elif kind == "chunk after a long cache":  # blocks shrink to fit the score bound
        past, n, b = 900, 200, 1
    else:
        past, n, b = 64, 150, 2
    query, _, _ = _inputs(b, 9, 3, n)
    key, value = torch.randn(b, 3, past + n, 64), torch.randn(b, 3, past + n, 64)
    mask = _causal_after(b, n, past)
    if kind == "per-head budget":  # each key head hides its own entries among the first 64
        present = torch.rand(b, 3, past) < 0.6
        mask = head_mask(mask, present, n, past + n, _Config(9), torch.float32)
    elif kind == "left-padded batch":  # row 1 starts 20 positions late: its first queries see nothing
        mask[1, :, :, past : past + 20] = False
        mask[1, :, :20] = False
    elif kind == "a mask that shows later keys":
        mask[..., -1] = True
    return (query, key, value), mask


class _Config:
    def __init__(self, heads: int) -> None:
        self.config = type("config", (), {"num_attention_heads": heads})()


MASKED = [
    "prefix reuse",
    "question after eviction",
    "chunk after a long cache",
    "per-head budget",
    "left-padded batch",
    "a mask that shows later keys",
]


@pytest.mark.parametrize("kind", MASKED)
def test_masked_prefill_chunks_match_sdpa_within_float32_rounding(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every masked chunk runs the blocks (SDPA is not called) and gives SDPA's outputs, with its mask,
    to float32 rounding; a query that sees nothing gets SDPA's 0."""
    from transformers.integrations import sdpa_attention

    torch.manual_seed(len(kind))
    (query, key, value), mask = _masked(kind)
    module = _Module(3)
    want, _ = sdpa_attention.sdpa_attention_forward(module, query, key, value, mask, scaling=0.125)  # type: ignore[arg-type]
    monkeypatch.setattr(onednn_attention, "SCORE_ELEMENTS", 3 * 1100 * 40)  # blocks of 40 at K = 1,100
    with monkeypatch.context() as patched:
        patched.setattr(sdpa_attention, "sdpa_attention_forward", None)  # calling it would fail
        got, _ = attention_forward(module, query, key, value, mask, scaling=0.125)
    assert got.shape == want.shape and got.is_contiguous()
    assert (got - want).abs().max().item() < BOUND
    if kind == "left-padded batch":
        assert torch.equal(want[1, :20], torch.zeros_like(want[1, :20]))
        assert torch.equal(got[1, :20], want[1, :20])


def test_a_float_mask_that_hides_a_whole_query_is_sdpas() -> None:
    """An additive mask at the dtype's minimum over a query's every key spreads it over all keys in
    SDPA (the scores stay finite); the blocks then read every key too, and match."""
    torch.manual_seed(5)
    (query, key, value), mask = _masked("question after eviction")
    additive = torch.zeros(mask.shape).masked_fill_(~mask, torch.finfo(torch.float32).min)
    additive[..., 4, :] = torch.finfo(torch.float32).min
    want = F.scaled_dot_product_attention(query, key.repeat_interleave(3, 1), value.repeat_interleave(3, 1),
                                          attn_mask=additive, scale=0.125).transpose(1, 2)  # fmt: skip
    got = attend_blocks(query, key, value, 0.125, additive)
    assert (got - want).abs().max().item() < BOUND


def test_onednn_is_the_default_for_float32_on_an_avx512_cpu_only() -> None:
    assert onednn_attention.default_attention("cpu", "float32", "AVX512") == "onednn"
    assert onednn_attention.default_attention("cpu", "float32", "AVX2") == "sdpa"
    assert onednn_attention.default_attention("cpu", "float32", "DEFAULT") == "sdpa"
    assert onednn_attention.default_attention("cpu", "bfloat16", "AVX512") == "sdpa"
    assert onednn_attention.default_attention("cuda", "float32", "AVX512") == "sdpa"
    here = torch.backends.cpu.get_cpu_capability()
    assert onednn_attention.default_attention("cpu", "float32") == ("onednn" if here == "AVX512" else "sdpa")


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


def test_onednn_attention_gives_sdpas_tokens_on_the_embedded_model(
    model_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control, a query-capturing, a per-head-budgeted, a certified, a context-scoped eviction and
    prefix reuse give SDPA's tokens; the masked chunks (the question after the context's eviction, the
    prompt after reused blocks) run the blocks too."""
    from hf_engine_support import shared_engine

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    cases = list(passkey_cases(model_folder, (0.2, 0.8), 1, 0))
    arms = [
        Full("full"),
        Eviction("snapkv-50", method="snapkv", ratio=0.5, window=16),  # captures prefill queries
        Eviction("adakv-50", method="adakv", ratio=0.5, window=16),  # per-head mask on later steps
        Eviction("streaming-cert", method="streaming", ratio=0.5, certificate=True),
        Eviction("context-50", method="streaming", ratio=0.5, scope="context"),  # masked question chunk
        Reuse("prefix", mode="prefix", block_size=16),  # the second case's chunk after reused blocks
    ]
    masked: list[int] = []
    blocks = onednn_attention.attend_blocks

    def counted(*args: Any) -> torch.Tensor:
        masked.extend([1] if len(args) > 4 and args[4] is not None else [])
        return blocks(*args)

    monkeypatch.setattr(onednn_attention, "attend_blocks", counted)
    with one_thread():
        default = shared_engine()  # onednn on an AVX-512 CPU, sdpa on others
        model = resolve_model("smollm2-135m")
        sdpa = default if default.attention == "sdpa" else HFEngine(model, attention="sdpa")
        onednn = default if default.attention == "onednn" else HFEngine(model, attention="onednn")
        assert onednn.fingerprint()["attn_implementation"] == onednn_attention.NAME
        assert onednn.fingerprint()["attention"] == "onednn" and "attention" not in sdpa.fingerprint()
        assert sdpa.fingerprint()["attn_implementation"] == "sdpa"
        for arm in arms:
            want = [g.output_token_ids for g in run_arm(sdpa, arm, cases)]
            before = len(masked)
            reused = run_arm(onednn, arm, cases)
            got = [g.output_token_ids for g in reused]
            assert got == want and all(want), arm.name
            if arm.name in ("context-50", "prefix"):
                assert len(masked) > before, arm.name  # every layer's masked chunk took the blocks
            if arm.name == "prefix":
                assert reused[1].n_cached_tokens > 0
