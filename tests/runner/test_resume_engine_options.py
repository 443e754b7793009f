"""A resumed run's engine is made on the defaults it started with: an option whose default changed (the
engine table's `resumed_as`; hf's `linear`, torch before oneDNN, and its `attention`, SDPA before)
takes the value the stored fingerprint records, or the old default where the fingerprint predates the
field, unless `-E` names it."""

from __future__ import annotations

from typing import Any

import pytest

from kvgate.engines.registry import engine_info
from kvgate.runner.job import Inputs, resume_engine_options


def _inputs(engine: str, options: dict[str, Any]) -> Inputs:
    unused: Any = None  # the options depend on the engine's name and -E alone
    return Inputs(None, unused, unused, engine, unused, None, options)


def _stored(fingerprint: dict[str, Any]) -> dict[str, Any]:
    return {"engine": fingerprint}


def test_hf_declares_linear_torch_and_attention_sdpa_as_its_old_defaults() -> None:
    assert dict(engine_info("hf").resumed_as) == {"linear": "torch", "attention": "sdpa"}


@pytest.mark.parametrize(
    ("fingerprint", "options", "made_with"),
    [
        ({"engine": "hf", "dtype": "float32"}, {}, {"linear": "torch", "attention": "sdpa"}),  # before both
        ({"engine": "hf", "linear": "onednn"}, {}, {"linear": "onednn", "attention": "sdpa"}),
        (
            {"engine": "hf", "linear": "onednn", "attention": "onednn"},
            {},
            {"linear": "onednn", "attention": "onednn"},
        ),
        ({"engine": "hf"}, {"threads": 1}, {"threads": 1, "linear": "torch", "attention": "sdpa"}),
        ({"engine": "hf"}, {"linear": "onednn"}, {"linear": "onednn", "attention": "sdpa"}),  # -E wins
    ],
)
def test_a_resumed_hf_run_keeps_its_kernels(
    fingerprint: dict[str, Any], options: dict[str, Any], made_with: dict[str, Any]
) -> None:
    assert resume_engine_options(_inputs("hf", options), _stored(fingerprint)) == made_with


def test_a_new_run_and_other_engines_get_their_options_unchanged() -> None:
    assert resume_engine_options(_inputs("hf", {"threads": 2}), None) == {"threads": 2}
    assert resume_engine_options(_inputs("fake", {}), _stored({"engine": "fake"})) == {}
    # --engine changed on resume (refused by the identity check): no pin from another engine's record
    assert resume_engine_options(_inputs("hf", {}), _stored({"engine": "fake"})) == {}
