"""The model's projections through oneDNN with weights packed once (the `linear` option, "onednn").

torch's float32 `nn.Linear` on CPU calls MKL's sgemm, which on AMD processors takes its AVX2 path: about
100 GFLOP/s per core on this machine's AVX-512 EPYC, where oneDNN's matmul on the same shapes, with the
weight reordered once into its blocked layout (`torch.ops.mkldnn._reorder_linear_weight`, as inductor's
weight freezing does), reaches ≈220; a matrix-vector product (a decode step's [1, in] rows) streams the
weights at ≈28 GB/s against MKL's ≈17 (bench/control_vs_vllm.py). Each decoder layer's `nn.Linear`, and
the head (unless `matvec=gemv` computes it from a transposed copy: matvec), keeps its module and its
hooks (the certificate and query capture hook q_proj and o_proj); only its forward changes, to
`_linear_pointwise(x [.., in], packed [out, in]) → [.., out]`. The module's own weight is then freed
(left as a meta tensor of its shape: reading its values fails loudly), so the model holds each
projection once; a head tied to the embeddings keeps the weight the lookup reads, beside its packed
copy (576 × 49,152 floats for the embedded model).

The sums are the same products in another order, so logits differ from MKL's in the last bits (≈1e-4 on
activations of magnitude 10) and a greedy choice between two near-equal tokens can differ. It is the
hf engine's default where it applies (`default_linear`: float32 on a CPU, torch built with oneDNN): on 12
smoke cases × the 32 shipped treatments the engine runs, 381 of 384 generations gave torch's tokens; the
3 others (q4_1, int4_per_token_head, nvfp4: 4-bit KV) matched up to the answer's full stop, where torch
ended and oneDNN went on one token (bench/linear_identity.py, bench/RESULTS.md). A run keeps one kernel
for all its arms, and a resumed run the one it started with.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

_PACKED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
"""The modules whose forward is the packed product (pack_linears)."""


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's packed linear for float32 on CPU."""
    mkldnn = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(mkldnn, name) for name in ("_reorder_linear_weight", "_linear_pointwise")
    )


def is_packed(module: nn.Module) -> bool:
    """Whether `module`'s forward is oneDNN's product on its packed weight laid out for many rows
    (pack_linears without one_row)."""
    return module in _PACKED


def default_linear(device: str, dtype: str) -> str:
    """The hf engine's `linear` when none is given: "onednn" for float32 on a CPU where torch has it,
    else "torch"."""
    return "onednn" if device == "cpu" and dtype == "float32" and onednn_available() else "torch"


def pack_linears(model: Any, head: bool = True, one_row: bool = False) -> int:
    """Route every float32 `nn.Linear` of the model's decoder layers, and its output head unless `head`
    is False (matvec.transpose_head computes it), through oneDNN with a packed weight; returns how many.
    `one_row`: the weights laid out for products of one row (oneDNN's batch-size hint 1: matvec). Each
    module's own weight is freed unless another module shares it (tied embeddings)."""
    if not onednn_available():
        raise RuntimeError("this torch build has no oneDNN packed linear")
    modules = [*model.model.layers.modules(), *([model.get_output_embeddings()] if head else [])]
    chosen = [m for m in modules if isinstance(m, nn.Linear) and m.weight.dtype == torch.float32]
    inputs = model.get_input_embeddings()
    shared = {inputs.weight.data_ptr()} if inputs is not None else set()
    for module in chosen:
        _pack(module, free=module.weight.data_ptr() not in shared, rows=1 if one_row else None)
    _copy_out_of_the_file(model)
    return len(chosen)


def _copy_out_of_the_file(model: Any) -> None:
    """Copy the parameters still held (embeddings, norms) into memory of their own. transformers maps
    the safetensors file and its tensors are views of that mapping, which packing read whole: while one
    tensor of the file lives, every page of it stays resident (≈ the model's size again on the embedded
    model). Tied parameters stay tied (the tensor inside each Parameter is replaced, not the Parameter)."""
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.device.type != "meta":
                parameter.data = parameter.data.clone()


def _pack(module: nn.Linear, free: bool, rows: int | None) -> None:
    with torch.no_grad():
        weight = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), rows)
    bias = None if module.bias is None else module.bias.detach()
    if free:
        module.weight = nn.Parameter(torch.empty_like(module.weight, device="meta"), requires_grad=False)

    def forward(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return out

    module.forward = forward  # type: ignore[method-assign,assignment]
    if rows is None:
        _PACKED.add(module)
