"""Treatment specs: one small frozen dataclass per kind (docs/reference.md, "Matrix and treatment TOML").

A treatment says what an arm does to the KV cache; engines decide whether they can apply it and refuse
before generating when they cannot. `fingerprint` identifies the resolved spec in the run manifest.
"""

from __future__ import annotations

import hashlib
import json
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal, get_args

from kvgate.registry import unknown_name
from kvgate.treatments.eviction_methods import EvictionMethodName

KINDS = ("full", "eviction", "quantize", "offload", "reuse", "composite")
Scope = Literal["prompt", "context"]
FP8Dtype = Literal["fp8_e4m3", "fp8_e5m2"]
GGMLType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]
"""llama.cpp's KV cache types (its `--cache-type-k` / `--cache-type-v` names): floats, and GGML's block
formats, each storing 32 values with their own scale (q8_0: 8-bit; q4_0, q5_0: 4 and 5 bits, symmetric;
q4_1, q5_1: with an offset; iq4_nl: 4-bit indices into a non-linear table)."""
PerTokenHeadDtype = Literal["int8_per_token_head", "int4_per_token_head", "fp8_per_token_head"]
"""vLLM's cache dtypes with one scale per cached token and KV head, computed as each entry is written
(vllm/config/cache.py `CacheDType`): symmetric INT8, FP8 E4M3, and INT4 with a zero point after a
Hadamard rotation; each stores its float32 scale beside the head's values."""
NVFP4Dtype = Literal["nvfp4"]
"""vLLM's NVFP4 cache: 4-bit E2M1 values in 16-value blocks, each block with an FP8 E4M3 scale."""
TurboQuantDtype = Literal["turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"]
"""vLLM's TurboQuant cache presets (Zandieh et al., 2025, arXiv:2504.19874): rotated vectors coded with
Lloyd-Max codebooks, K and V at the bits each name says (k8v4: FP8 keys, 4-bit values)."""
KVDtype = Literal[FP8Dtype, GGMLType, PerTokenHeadDtype, NVFP4Dtype, TurboQuantDtype]
Scale = Literal["tensor", "head", "token", "block"]
Tier = Literal["host", "disk"]
ReuseMode = Literal["prefix", "span"]
Convention = Literal["kvgate", "kvpress"]
"""How an eviction counts and ranks what it keeps. kvgate: n − round(ratio·n) entries, ties to later
positions; kvpress (as kvpress 0.5.5 does): int(n·(1 − ratio)) entries, ties to earlier positions."""

EVICTION_METHOD_NAMES: tuple[str, ...] = get_args(EvictionMethodName)
SCOPES: tuple[str, ...] = get_args(Scope)
FP8_DTYPES: tuple[str, ...] = get_args(FP8Dtype)
GGML_KV_TYPES: tuple[str, ...] = get_args(GGMLType)
GGML_BLOCK_TYPES = GGML_KV_TYPES[3:]
"""The GGML types that quantise (all but f32, f16 and bf16)."""
PER_TOKEN_HEAD_DTYPES: tuple[str, ...] = get_args(PerTokenHeadDtype)
NVFP4_DTYPES: tuple[str, ...] = get_args(NVFP4Dtype)
TURBOQUANT_DTYPES: tuple[str, ...] = get_args(TurboQuantDtype)
VLLM_KV_DTYPES = (*PER_TOKEN_HEAD_DTYPES, *NVFP4_DTYPES, *TURBOQUANT_DTYPES)
"""vLLM's cache dtypes beyond FP8 (beside FP8_DTYPES)."""
KV_DTYPES: tuple[str, ...] = get_args(KVDtype)
SCALES: tuple[str, ...] = get_args(Scale)
TIERS: tuple[str, ...] = get_args(Tier)
REUSE_MODES: tuple[str, ...] = get_args(ReuseMode)
CONVENTIONS: tuple[str, ...] = get_args(Convention)
CERTIFICATE_KEYS = ("certificate", "certificate_share", "certificate_floor", "certificate_confidence")
NATIVE_SCALE = {
    **{d: "block" for d in (*GGML_KV_TYPES, *NVFP4_DTYPES)},
    **{d: "token" for d in (*PER_TOKEN_HEAD_DTYPES, *TURBOQUANT_DTYPES)},
}
"""The one scale granularity each non-FP8 dtype defines (FP8 takes tensor, head or token)."""


@dataclass(frozen=True)
class Treatment:
    """Base: every treatment has a name, a kind and engine-specific arguments in the engine's own names."""

    name: str
    engine_args: dict[str, Any] = field(default_factory=dict, kw_only=True)
    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        data = {"kind": self.kind, **asdict(self)}
        if data.get("convention") == CONVENTIONS[0]:
            del data["convention"]  # the default leaves specs (and fingerprints) as they were before it
        if isinstance(self, Composite):
            data["of"] = [t.to_dict() for t in self.of]
        return data

    def fingerprint(self) -> str:
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def parts(self) -> tuple[Treatment, ...]:
        """The non-composite treatments this one applies, in order."""
        return (self,)


@dataclass(frozen=True)
class Full(Treatment):
    """The full-cache control: nothing removed, quantised, moved or reused."""

    kind: ClassVar[str] = "full"


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """A ValueError naming `name`'s choices when `value` is not one of them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def field_choices(spec: type[Treatment]) -> dict[str, tuple[str, ...]]:
    """Each field of `spec` whose type is a Literal (or one or None) → its values: what `kvgate
    treatments` lists, read from the same types the checks read."""
    hints = typing.get_type_hints(spec)
    out = {}
    for f in fields(spec):
        hint = hints[f.name]
        options = [hint] if typing.get_origin(hint) is Literal else get_args(hint)  # X | None: each side
        values = [v for o in options if typing.get_origin(o) is Literal for v in get_args(o)]
        if values:
            out[f.name] = tuple(values)
    return out


def kept_entries(n: int, ratio: float, convention: str = "kvgate") -> int:
    """Entries kept of n when a share `ratio` is removed (at least one is always kept): n − round(ratio·n),
    or int(n·(1 − ratio)) under the kvpress convention."""
    kept = int(n * (1 - ratio)) if convention == "kvpress" else n - round(ratio * n)
    return max(1, kept)


@dataclass(frozen=True)
class Eviction(Treatment):
    """Remove a share `ratio` of the prompt's KV entries after prefill, chosen by `method`.

    scope "prompt" compresses everything prefilled (query-aware); "context" compresses only the
    context before the question, then prefills the question uncompressed (query-agnostic).
    `convention` (CONVENTIONS): how many entries are kept and which of tied scores win.
    `certificate` (hf engine): also keep the dropped keys and a sample of the dropped values, and bound
    the attention-output error of every decoding step (`certificate_share` expected sample share,
    `certificate_floor` least inclusion probability, `certificate_confidence` of the bound;
    docs/certificate.md); the outputs are the same as without it.
    """

    method: EvictionMethodName = "streaming"
    ratio: float = 0.5
    scope: Scope = "prompt"
    sink_tokens: int = 4
    window: int = 32
    seed: int = 0
    during_decoding: bool = False
    certificate: bool = False
    certificate_share: float = 0.1
    certificate_floor: float = 0.02
    certificate_confidence: float = 0.95
    convention: Convention = "kvgate"
    kind: ClassVar[str] = "eviction"

    def __post_init__(self) -> None:
        if self.method not in EVICTION_METHOD_NAMES:  # a ValueError: the matrix says where it stands
            unknown = unknown_name("eviction method", str(self.method), list(EVICTION_METHOD_NAMES))
            raise ValueError(str(unknown))
        if not 0.0 <= self.ratio < 1.0:
            raise ValueError(f"ratio must be in [0, 1), got {self.ratio}")
        check_choice("scope", self.scope, SCOPES)
        check_choice("convention", self.convention, CONVENTIONS)
        if self.sink_tokens < 0 or self.window < 1:
            raise ValueError("sink_tokens must be ≥ 0 and window ≥ 1")
        if not (0.0 < self.certificate_share <= 1.0 and 0.0 < self.certificate_floor <= 1.0):
            raise ValueError("certificate_share and certificate_floor must be in (0, 1]")
        if not 0.5 <= self.certificate_confidence < 1.0:
            raise ValueError(f"certificate_confidence must be in [0.5, 1), got {self.certificate_confidence}")

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if not self.certificate:  # off: the spec (and its fingerprint) reads as it did before the keys
            for key in CERTIFICATE_KEYS:
                del data[key]
        return data


@dataclass(frozen=True)
class Quantize(Treatment):
    """Store K and V in a quantised KV format: FP8 with per-tensor, per-head or per-token scales, a
    llama.cpp cache type, or one of vLLM's newer cache dtypes (VLLM_KV_DTYPES).

    FP8 (`fp8_e4m3`, `fp8_e5m2`) takes `scale` tensor, head or token. Every other dtype carries its
    scales as its format defines them (NATIVE_SCALE): a GGML type and NVFP4 per block ("block"), the
    per-token-head and TurboQuant dtypes per cached token and head ("token"); the default "tensor" is
    read as that one, any other scale is refused.
    `dtype_v`: V's type when it differs from K's (`dtype`), as llama.cpp's `--cache-type-v`; GGML types.
    """

    dtype: KVDtype = "fp8_e4m3"
    scale: Scale = "tensor"
    dtype_v: GGMLType | None = None
    kind: ClassVar[str] = "quantize"

    def __post_init__(self) -> None:
        check_choice("dtype", self.dtype, KV_DTYPES)
        check_choice("scale", self.scale, SCALES)
        native = NATIVE_SCALE.get(self.dtype)
        if native is not None and self.scale == "tensor":
            object.__setattr__(self, "scale", native)
        elif native == "block" and self.scale != "block":
            size = 16 if self.dtype in NVFP4_DTYPES else 32
            raise ValueError(
                f"{self.dtype} stores a scale per {size}-value block; scale {self.scale!r} is FP8's"
            )
        elif native == "token" and self.scale != "token":
            raise ValueError(
                f"{self.dtype} stores a scale per cached token and head; scale {self.scale!r} is FP8's"
            )
        elif native is None and self.scale == "block":
            raise ValueError(f"scale 'block' belongs to the GGML types and NVFP4, not {self.dtype}")
        ggml = self.dtype in GGML_KV_TYPES
        if self.dtype_v is not None and not (ggml and self.dtype_v in GGML_KV_TYPES):
            raise ValueError(
                f"dtype_v is V's llama.cpp cache type beside a GGML dtype: one of {', '.join(GGML_KV_TYPES)}"
                f" with dtype one of them, got dtype {self.dtype!r}, dtype_v {self.dtype_v!r}"
            )

    @property
    def value_dtype(self) -> str:
        """V's type: `dtype_v` when given, else K's."""
        return self.dtype_v or self.dtype

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.dtype_v is None:  # unset: the spec (and its fingerprint) reads as it did before the key
            del data["dtype_v"]
        return data


@dataclass(frozen=True)
class Offload(Treatment):
    """Move the KV to a slower tier (`host` memory or `disk`) after prefill and back before decoding."""

    tier: Tier = "host"
    block_size: int = 16
    kind: ClassVar[str] = "offload"

    def __post_init__(self) -> None:
        check_choice("tier", self.tier, TIERS)
        if self.block_size < 1:
            raise ValueError("block_size must be ≥ 1")


@dataclass(frozen=True)
class Reuse(Treatment):
    """Reuse KV computed for earlier requests: `prefix` (same token prefix) or `span` (any offset)."""

    mode: ReuseMode = "prefix"
    block_size: int = 16
    kind: ClassVar[str] = "reuse"

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, REUSE_MODES)
        if self.block_size < 1:
            raise ValueError("block_size must be ≥ 1")


@dataclass(frozen=True)
class Composite(Treatment):
    """Several treatments applied in order, e.g. eviction then FP8 (the ablation matrix's D = B + C)."""

    of: tuple[Treatment, ...] = ()
    kind: ClassVar[str] = "composite"

    def __post_init__(self) -> None:
        if len(self.of) < 2:
            raise ValueError("a composite needs at least two treatments in 'of'")
        kinds = [t.kind for t in self.parts()]
        if "full" in kinds:
            raise ValueError("a composite cannot include the full-cache control")
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"a composite applies each kind once, got {kinds}")

    def parts(self) -> tuple[Treatment, ...]:
        return tuple(p for t in self.of for p in t.parts())


TREATMENT_TYPES: dict[str, type[Treatment]] = {
    t.kind: t for t in (Full, Eviction, Quantize, Offload, Reuse, Composite)
}
