"""`-E linear=onednn` (the default for float32 on CPU): the decoder's projections through oneDNN with
packed weights. Each module keeps its hooks, its outputs stay within float32 rounding of nn.Linear's, its
own weight is freed unless tied, bad combinations are refused in one line, and on the embedded model the
default's tokens match linear=torch's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hf_engine_support import one_thread, passkey_cases, run_arm
from torch import nn

from kvgate.engines.hf.onednn_linear import default_linear, onednn_available, pack_linears
from kvgate.errors import BadInput
from kvgate.treatments.spec import Eviction, Full

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")


class _Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(64, 32, bias=True)
        self.down = nn.Linear(32, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down(self.q_proj(x))
        return out


class _Tiny(nn.Module):
    """The shape pack_linears walks: model.layers and the output head, tied to the input embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleList([_Layer(), _Layer()])
        self.model.embed_tokens = nn.Embedding(8, 16)
        self.lm_head = nn.Linear(16, 8)
        self.lm_head.weight = self.model.embed_tokens.weight

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens


def test_packed_projections_keep_their_hooks_and_values() -> None:
    torch.manual_seed(0)
    tiny = _Tiny().eval()
    x = torch.randn(2, 5, 64)
    with torch.inference_mode():
        before = [tiny.lm_head(layer(x)) for layer in tiny.model.layers]
    seen: list[tuple[int, ...]] = []
    tiny.model.layers[0].q_proj.register_forward_hook(lambda m, a, out: seen.append(tuple(out.shape)))
    assert pack_linears(tiny) == 5
    with torch.inference_mode():
        after = [tiny.lm_head(layer(x)) for layer in tiny.model.layers]
    assert seen == [(2, 5, 32)]
    for a, b in zip(before, after, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)
    assert all(layer.q_proj.weight.is_meta and layer.down.weight.is_meta for layer in tiny.model.layers)
    assert tiny.lm_head.weight is tiny.model.embed_tokens.weight and not tiny.lm_head.weight.is_meta


def test_onednn_is_the_default_for_float32_on_cpu_only() -> None:
    assert default_linear("cpu", "float32") == "onednn"
    assert default_linear("cpu", "bfloat16") == "torch"
    assert default_linear("cuda", "float32") == "torch"


@pytest.mark.parametrize(
    ("options", "named"),
    [({"linear": "mkl"}, "linear must be one of"), ({"linear": "onednn", "dtype": "bfloat16"}, "float32")],
)
def test_bad_linear_options_are_refused_before_loading(options: dict[str, Any], named: str) -> None:
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    with pytest.raises(BadInput, match=named):
        HFEngine(resolve_model("smollm2-135m"), **options)


def test_the_default_control_and_eviction_match_linear_torch_on_the_embedded_model(
    model_folder: Path,
) -> None:
    from hf_engine_support import shared_engine

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    cases = list(passkey_cases(model_folder, (0.2, 0.8), 1, 0))
    arms = [Full("full"), Eviction("snapkv-50", method="snapkv", ratio=0.5, window=16)]
    with one_thread():
        default = shared_engine()
        plain = HFEngine(resolve_model("smollm2-135m"), linear="torch")
        assert default.fingerprint()["linear"] == "onednn" and "linear" not in plain.fingerprint()
        model = default.model
        assert model.model.layers[0].self_attn.q_proj.weight.is_meta  # freed: the packed copy serves
        assert model.lm_head.weight is model.model.embed_tokens.weight and not model.lm_head.weight.is_meta
        for arm in arms:
            want = [g.output_token_ids for g in run_arm(plain, arm, cases)]
            got = [g.output_token_ids for g in run_arm(default, arm, cases)]
            assert got == want and all(want), arm.name
