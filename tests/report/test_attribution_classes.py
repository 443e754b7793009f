"""Attribution of a composite's failures to its parts, including three parts and parts without verdicts."""

from __future__ import annotations

import numpy as np

from kvgate.report.analysis.attribution import attribute, part_arms
from kvgate.report.analysis.run_data import CERTIFICATE_SCORES, ArmRows


def rows(failing: set[int], errors: frozenset[int] = frozenset(), n: int = 8) -> ArmRows:
    idx = np.arange(n)
    return ArmRows(
        present=np.ones(n, bool),
        passed=~np.isin(idx, list(failing)),
        error=np.isin(idx, list(errors)),
        mean_logprob=np.zeros(n),
        first_divergence=np.full(n, -1),
        n_prompt_tokens=np.full(n, 100),
        certificate={name: np.full(n, np.nan) for name in CERTIFICATE_SCORES},
    )


def test_three_parts_and_unattributed_cases() -> None:
    failures = np.isin(np.arange(8), [0, 1, 2, 3, 4, 5])
    parts = [
        ("ev", "eviction", rows({0, 3})),
        ("q", "quantize", rows({1, 3}, errors=frozenset({5}))),
        ("off", "offload", rows({2, 3, 4})),
    ]
    # 0 eviction only · 1 quantize only · 2 offload only · 3 all three · 4 offload only · 5 no verdict in q
    assert attribute(failures, parts) == {
        "eviction": 1,
        "quantize": 1,
        "offload": 2,
        "several": 1,
        "interaction": 0,
        "unattributed": 1,
    }


def test_parts_match_arms_by_spec_even_under_another_name() -> None:
    part = {"kind": "quantize", "name": "fp8", "dtype": "fp8_e4m3"}
    arms = {
        "full": {"spec": {"kind": "full", "name": "full"}},
        "fp8-alone": {"spec": {"kind": "quantize", "name": "fp8-alone", "dtype": "fp8_e4m3"}},
    }
    spec = {"kind": "composite", "of": [part, {"kind": "eviction", "name": "snap", "ratio": 0.5}]}
    assert part_arms(spec, arms) == ([("fp8-alone", "quantize")], ["snap"])
