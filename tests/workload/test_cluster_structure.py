"""The cluster structure a freeze produces: reported on every freeze and check, and a warning naming
each prefix group that holds more than 20% of the cases."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.workload.case import Case
from kvgate.workload.clusters import cluster_structure, describe, warnings

SYSTEM = "You are the support assistant of Example Corp. " + " ".join(f"Rule {i} applies." for i in range(60))


def _case(i: int, group: str | None) -> Case:
    return Case(
        f"c{i}", "s", "qa", ({"role": "user", "content": "q"},), 8, "exact", "a", {}, group, False, {}
    )


def _trace_suite(tmp_path: Path, own_groups: bool) -> Path:
    """20 support requests sharing one long system prompt (a prefix group of 20 by prefix_min_tokens),
    beside 10 short ones of their own; `own_groups`: each shared-prompt record names its own group."""
    records = [
        {
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Order {i}?"}],
            "expected": f"order {i}",
            "task": "support",
            **({"prefix_group": f"ticket-{i}"} if own_groups else {}),
        }
        for i in range(20)
    ]
    records += [
        {"messages": [{"role": "user", "content": f"Say {i}."}], "expected": str(i), "task": "chat"}
        for i in range(10)
    ]
    trace = tmp_path / "support.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    suite = tmp_path / "bot.toml"
    suite.write_text(
        f'name = "bot"\n[[trace]]\npath = "{trace}"\nvalidator = "exact"\nprefix_min_tokens = 64\n'
    )
    return suite


def test_a_shared_system_prompt_is_one_cluster_and_freeze_warns_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(cli, ["freeze", str(_trace_suite(tmp_path, False)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "clusters: 30 cases in 11 clusters (1 prefix group: 1 × 20 cases; 10 alone)" in result.stdout
    assert "holds 20 cases (67%)" in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith("warning: prefix group 'trace-") and "(suite 'bot', task 'support')" in warning
    assert "holds 20 of 30 cases (67%)" in warning and 'cluster = "none"' in warning
    checked = CliRunner().invoke(cli, ["freeze", "--check", str(out)])
    assert "30 cases in 11 clusters" in checked.stdout and "warning: prefix group 'trace-" in checked.stderr


def test_records_with_their_own_prefix_groups_are_independent_and_draw_no_warning(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(cli, ["freeze", str(_trace_suite(tmp_path, True)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "clusters: 30 cases in 30 clusters (no prefix groups: every case is its own)" in result.stdout
    assert "warning" not in result.stderr


def test_the_reuse_suite_reports_its_groups_without_a_warning(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["freeze", "reuse", "-o", str(tmp_path / "reuse.parquet")])
    assert result.exit_code == 0, result.output
    assert "64 cases in 16 clusters (16 prefix groups: 16 × 4 cases; 0 alone)" in result.stdout
    assert "warning" not in result.stderr


def test_structure_of_unequal_clusters() -> None:
    ten_by_twenty = [_case(i, f"g{i // 20}") for i in range(200)] + [_case(200 + i, None) for i in range(100)]
    s = cluster_structure(ten_by_twenty)
    assert (s.clusters, s.alone, s.largest) == (110, 100, ("g0", 20))
    assert "300 cases in 110 clusters (10 prefix groups: 10 × 20 cases; 100 alone)" in describe(s)
    assert warnings(s) == []  # 20 of 300 is 7%
    one_big = [_case(i, "big" if i < 60 else None) for i in range(200)]
    (line,) = warnings(cluster_structure(one_big))
    assert line.startswith("prefix group 'big' (suite 's', task 'qa') holds 60 of 200 cases (30%)")
    exactly = [_case(i, "edge" if i < 20 else None) for i in range(100)]
    assert warnings(cluster_structure(exactly)) == []  # 20% is not more than 20%
    lone = [_case(0, "only"), _case(1, None)]  # a group of one case is a case alone
    assert cluster_structure(lone).clusters == 2 and cluster_structure(lone).groups == {}
