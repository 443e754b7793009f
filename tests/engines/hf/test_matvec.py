"""`-E head=transposed` (the default for float32 on CPU): the output head as x · Wᵀ from a transposed copy.
Its logits stay within float32 rounding of nn.Linear's, one row or several, the module keeps its hooks,
a tied weight stays for the embeddings (an untied one is freed), bad
combinations are refused in one line, and on the embedded model its control and eviction arms give the
"linear" head's tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hf_engine_support import one_thread, passkey_cases, run_arm
from torch import nn

from kvgate.engines.hf.matvec import transpose_head
from kvgate.errors import BadInput
from kvgate.treatments.spec import Eviction, Full


class _Tiny(nn.Module):
    """What transpose_head reads: an output head, tied to the input embeddings or not."""

    def __init__(self, tied: bool) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(300, 48)
        self.lm_head = nn.Linear(48, 300, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def get_input_embeddings(self) -> nn.Module:
        return self.embed_tokens


@pytest.mark.parametrize("tied", [True, False])
def test_the_transposed_head_keeps_values_hooks_and_a_tied_weight(tied: bool) -> None:
    torch.manual_seed(0)
    tiny = _Tiny(tied).eval()
    x = torch.randn(3, 1, 48)
    with torch.inference_mode():
        before = tiny.lm_head(x)
    seen: list[tuple[int, ...]] = []
    tiny.lm_head.register_forward_hook(lambda m, a, out: seen.append(tuple(out.shape)))
    transpose_head(tiny)
    with torch.inference_mode():
        after = tiny.lm_head(x)
    assert seen == [(3, 1, 300)]
    assert after.shape == before.shape and torch.allclose(after, before, atol=1e-5, rtol=1e-5)
    assert tiny.lm_head.weight.is_meta is not tied
    assert (tiny.lm_head.weight is tiny.embed_tokens.weight) is tied


@pytest.mark.parametrize(
    ("options", "named"),
    [({"matvec": "mv"}, "matvec must be one of"), ({"matvec": "gemv", "dtype": "bfloat16"}, "float32")],
)
def test_bad_matvec_options_are_refused_before_loading(options: dict[str, Any], named: str) -> None:
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    with pytest.raises(BadInput, match=named):
        HFEngine(resolve_model("smollm2-135m"), **options)


def test_gemv_prefills_as_gemm_and_its_arms_give_gemm_tokens_on_the_embedded_model(
    model_folder: Path,
) -> None:
    from hf_engine_support import shared_engine

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.engines.hf.forward import forward_at
    from kvgate.engines.hf.preallocated_cache import preallocated_cache
    from kvgate.models import resolve_model

    cases = list(passkey_cases(model_folder, (0.2, 0.8), 1, 0))
    arms = [Full("full"), Eviction("snapkv-50", method="snapkv", ratio=0.5, window=16)]
    with one_thread():
        gemm = shared_engine()
        default = HFEngine(resolve_model("smollm2-135m"), matvec="gemv")
        assert default.fingerprint()["matvec"] == "gemv" and "matvec" not in gemm.fingerprint()
        model = default.model
        assert model.lm_head.weight is model.model.embed_tokens.weight and not model.lm_head.weight.is_meta
        ids = torch.tensor([cases[0].prompt_token_ids])
        caches = [preallocated_cache(e.model.config, ids.shape[1]) for e in (default, gemm)]
        with torch.inference_mode():
            for engine, cache in zip((default, gemm), caches, strict=True):
                forward_at(engine.model, ids, cache, 0)
        for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
        for arm in arms:
            want = [g.output_token_ids for g in run_arm(gemm, arm, cases)]
            got = [g.output_token_ids for g in run_arm(default, arm, cases)]
            assert got == want and all(want), arm.name
