"""Policy files: strict keys and types, slice names checked, one-line errors."""

from __future__ import annotations

import pytest

from kvgate.errors import BadInput
from kvgate.gate.policy import parse_policy, slice_terms


def test_full_policy_parses() -> None:
    policy = parse_policy(
        'tau = 0.05\nconfidence = 0.9\nrule = "point"\nmin_control_passes = 30\nholm = true\n'
        'critical = ["task=passkey", "critical"]\n[slice_tau]\n"task=needle/ctx_bucket=4k" = 0.2\n',
        "p.toml",
    )
    assert policy.holm is True and policy.rule == "point"
    assert policy.tau_for("task=needle/ctx_bucket=4k") == 0.2
    assert policy.tau_for("task=passkey") == 0.05
    assert policy.named_slices == ("task=passkey", "critical", "task=needle/ctx_bucket=4k")
    assert policy.alpha == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("holm = 1\n", "holm must be true or false"),
        ('critical = "task=passkey"\n', "critical must be a list"),
        ('critical = ["passkey"]\n', "must be 'all', 'critical' or column=value"),
        ('critical = ["task=a/task=b"]\n', "names a column twice"),
        ("min_control_passes = true\n", "min_control_passes must be an integer"),
        ("confidence = 0.3\n", "confidence must be in [0.5, 1)"),
        ("[slice_tau]\n'task=x' = 2\n", "slice_tau 'task=x' must be in [0, 1]"),
        ("slice_tau = 3\n", "slice_tau must be a table"),
        ("signal_alpha = 1.0\n", "signal_alpha must be in [0, 1)"),
        ("signal_alpha = -0.1\n", "signal_alpha must be in [0, 1)"),
        ('aa_margin = "0.1"\n', "aa_margin must be in [0, 1)"),
        ("aa_alpha = 0\n", "aa_alpha must be in (0, 1)"),
        ("aa_alpha = 1.0\n", "aa_alpha must be in (0, 1)"),
        ("allow_unwinnable = 1\n", "allow_unwinnable must be true or false"),
        ('cluster = "prefix group"\n', "cluster must be 'prefix_group', 'none' or a column"),
    ],
)
def test_bad_policies_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_policy(text, "p.toml")
    assert message in str(info.value)
    assert str(info.value).startswith("p.toml")
    assert "\n" not in str(info.value)


def test_slice_terms() -> None:
    assert slice_terms("all") == []
    assert slice_terms("task=a/ctx_bucket=4k") == [("task", "a"), ("ctx_bucket", "4k")]


def test_aa_alpha_is_declared_with_its_default() -> None:
    assert parse_policy("", "p.toml").aa_alpha == 0.3
    assert parse_policy("aa_alpha = 0.05\n", "p.toml").aa_alpha == 0.05


def test_the_safety_floor() -> None:
    assert parse_policy("", "p.toml").unsafe == []
    assert parse_policy("confidence = 0.8\n", "p.toml").unsafe == []
    assert parse_policy("confidence = 0.79\n", "p.toml").unsafe == ["confidence 0.79 < 0.8"]
    assert "no error control" in parse_policy('rule = "point"\n', "p.toml").unsafe[0]
