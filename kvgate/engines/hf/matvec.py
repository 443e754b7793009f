"""Products of one row per sequence on weights laid out for one row (the `matvec` option, "gemv").

Two of the hf engine's products read a whole weight for one row x [B, 1, in] per sequence: the output
head at every forward (logits_to_keep = 1: 576 × 49,152 floats for the embedded model, a fifth of a
decode step's reads) and every projection of a decode step. With "gemm" (the default) they run on the
layouts the prefill's matrix products use: oneDNN's packed weights (onednn_linear), the head among
them. With "gemv" (float32 on CPU):

- the projections are packed for one row (oneDNN's batch-size hint 1): a decode step's products read
  them faster (17–22% more GB per CPU-second on the model's shapes, measured on a loaded machine), and
  a prefill's products give the same floats at the same rate as on the default packing;
- the head is x · Wᵀ from a contiguous copy of Wᵀ [in, vocab] (`transpose_head`): MKL streams it row
  after row, adding x_i times each row into the logits, which stay in cache, ≈1.8× the rate of the dot
  products of a [vocab, in] layout; the copy replaces the packed one, and a head tied to the
  embeddings keeps the weight the lookup reads.

The sums run in another order, so a decode step's logits and entries differ from "gemm"'s in the last
bits and a greedy choice between two near-equal tokens can differ; bench/matvec_identity.py measures
how often on every shipped treatment, which a change of the default waits for. The fingerprint records
`matvec` when it is not "gemm".
"""

from __future__ import annotations

from typing import Any

import torch

MATVECS = ("gemm", "gemv")


def transpose_head(model: Any) -> None:
    """Compute the model's output head as x · Wᵀ from a contiguous copy of Wᵀ [in, vocab] (a float32
    nn.Linear on CPU; the module keeps its hooks). Its own weight is freed unless the input embeddings
    share it."""
    head = model.get_output_embeddings()
    weight = head.weight
    if not isinstance(head, torch.nn.Linear) or weight.dtype != torch.float32 or weight.device.type != "cpu":
        raise ValueError("matvec=gemv computes the head of a float32 nn.Linear on the CPU")
    with torch.no_grad():
        transposed = weight.detach().t().contiguous()  # [in, vocab]
    bias = None if head.bias is None else head.bias.detach()
    inputs = model.get_input_embeddings()
    if inputs is None or inputs.weight.data_ptr() != weight.data_ptr():
        head.weight = torch.nn.Parameter(torch.empty_like(weight, device="meta"), requires_grad=False)

    def forward(x: torch.Tensor) -> torch.Tensor:
        out = torch.matmul(x, transposed)  # [.., in] · [in, vocab] → [.., vocab]
        return out if bias is None else out.add_(bias)

    head.forward = forward  # type: ignore[method-assign,assignment]
