"""The model's projections through oneDNN with weights packed once (the `linear` option, "onednn").

torch's float32 `nn.Linear` on CPU calls MKL's sgemm, which on AMD processors takes its AVX2 path: about
100 GFLOP/s per core on this machine's AVX-512 EPYC, where oneDNN's matmul on the same shapes, with the
weight reordered once into its blocked layout (`torch.ops.mkldnn._reorder_linear_weight`, as inductor's
weight freezing does), reaches ≈220; a matrix-vector product (a decode step's [1, in] rows) streams the
weights at ≈28 GB/s against MKL's ≈17 (bench/control_vs_vllm.py). Each decoder layer's `nn.Linear`, and
the head, keeps its module and its hooks (the certificate and query capture hook q_proj and o_proj);
only its forward changes, to `_linear_pointwise(x [.., in], packed [out, in]) → [.., out]`. The packed
weights are copies (≈ the model's size again; a head tied to the embeddings stays tied for the lookup).

The sums are the same products in another order, so logits differ from MKL's in the last bits (≈1e-4 on
activations of magnitude 10) and a greedy choice between two near-equal tokens can differ: the option is
off by default, and its tokens are compared with the default's in bench/control_vs_vllm.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's packed linear for float32 on CPU."""
    mkldnn = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(mkldnn, name) for name in ("_reorder_linear_weight", "_linear_pointwise")
    )


def pack_linears(model: Any) -> int:
    """Route every float32 `nn.Linear` of the model's decoder layers, and its output head, through oneDNN
    with a packed weight; returns how many. The module's own weight stays for whoever reads it."""
    if not onednn_available():
        raise RuntimeError("this torch build has no oneDNN packed linear")
    modules = [*model.model.layers.modules(), model.get_output_embeddings()]
    chosen = [m for m in modules if isinstance(m, nn.Linear) and m.weight.dtype == torch.float32]
    for module in chosen:
        _pack(module)
    return len(chosen)


def _pack(module: nn.Linear) -> None:
    with torch.no_grad():
        weight = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), None)
    bias = None if module.bias is None else module.bias.detach()

    def forward(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return out

    module.forward = forward  # type: ignore[method-assign,assignment]
