"""llama.cpp's KV cache types (`--cache-type-k` / `--cache-type-v`) and what each stores per value.

A GGML block format stores `values` numbers in `bytes` bytes, its scale included (ggml's type traits):
q8_0 an f16 scale and 32 int8; q4_0 an f16 scale and 32 nibbles; q4_1 also an f16 minimum; q5_0 and q5_1
add 32 high bits to those; iq4_nl an f16 scale and 32 nibbles indexing a non-linear table. A row of n
values (n a multiple of 32) takes n / values · bytes bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.treatments.spec import GGML_KV_TYPES, Quantize, Treatment

CONTROL_TYPE = "f16"
"""llama.cpp's default KV cache type: the full-cache control's."""


@dataclass(frozen=True)
class Layout:
    """`bytes` bytes hold `values` values (one block)."""

    bytes: int
    values: int

    def row_bytes(self, n: int) -> int:
        """Bytes of a row of `n` values (`n` a multiple of the block)."""
        return n // self.values * self.bytes


LAYOUTS: dict[str, Layout] = {
    "f32": Layout(4, 1),
    "f16": Layout(2, 1),
    "bf16": Layout(2, 1),
    "q8_0": Layout(34, 32),
    "q4_0": Layout(18, 32),
    "q4_1": Layout(20, 32),
    "q5_0": Layout(22, 32),
    "q5_1": Layout(24, 32),
    "iq4_nl": Layout(18, 32),
}
assert set(LAYOUTS) == set(GGML_KV_TYPES)


def kv_dtype_refusal(dtype: str, on_cpu: bool = False) -> str | None:
    """Why llama.cpp cannot store a treatment dtype as a KV cache type (CPU or GPU alike), or None."""
    if dtype in LAYOUTS:
        return None
    return f"llama.cpp's KV cache types are {', '.join(GGML_KV_TYPES)}; {dtype} is not one"


def arm_kv_types(treatment: Treatment) -> tuple[str, str]:
    """(K's type, V's type) of an arm: its quantize part's, else llama.cpp's default f16 for both."""
    part = next((p for p in treatment.parts() if isinstance(p, Quantize)), None)
    if part is None:
        return CONTROL_TYPE, CONTROL_TYPE
    return part.dtype, part.value_dtype


def ggml_type_id(name: str) -> int:
    """The `enum ggml_type` value of a type name, from llama-cpp-python's bindings."""
    import llama_cpp

    return int(getattr(llama_cpp, f"GGML_TYPE_{name.upper()}"))
