"""Which arms the report holds to "must not change any answer"."""

from __future__ import annotations

from kvgate.report.analysis.arm import is_lossless
from kvgate.treatments.matrix import catalog_tables, parse_treatment


def spec(name: str) -> dict[str, object]:
    return parse_treatment(name, catalog_tables(), "catalog").to_dict()


def test_offload_and_prefix_reuse_are_lossless_span_reuse_is_not() -> None:
    assert is_lossless(spec("offload-host")) and is_lossless(spec("offload-disk"))
    assert is_lossless(spec("prefix-reuse"))
    assert not is_lossless(spec("span-reuse"))  # EPIC/CacheBlend-style: the span never saw its new prefix
    assert not is_lossless(spec("streaming-50")) and not is_lossless(spec("fp8-e4m3"))


def test_a_composite_is_lossless_only_if_every_part_is() -> None:
    assert is_lossless({"kind": "composite", "of": [spec("offload-host"), spec("prefix-reuse")]})
    assert not is_lossless({"kind": "composite", "of": [spec("prefix-reuse"), spec("span-reuse")]})
    assert not is_lossless(spec("snapkv-50+fp8"))
