"""The cluster structure a freeze produces: reported on every freeze and check, and a warning naming
each prefix group, and each shared prefix counted as independent cases, that holds more than 20% of the
cases."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner, Result

from kvgate.cli import cli
from kvgate.workload.case import Case
from kvgate.workload.clusters import cluster_structure, describe, warnings
from kvgate.workload.schema import read_workload

SYSTEM = "You are the support assistant of Example Corp. " + " ".join(f"Rule {i} applies." for i in range(60))
SHORT_SYSTEM = "You are the support assistant of Example Corp. " + " ".join(
    f"Rule {i} applies." for i in range(35)
)


def _case(i: int, group: str | None) -> Case:
    return Case(
        f"c{i}", "s", "qa", ({"role": "user", "content": "q"},), 8, "exact", "a", {}, group, False, {}
    )


def _request(i: int) -> str:
    """A support request of its own, about 300 words-tokens long (the word tokenizer counts words)."""
    return f"Ticket {i}: " + " ".join(f"item{i}x{j} arrived broken." for j in range(75))


def _trace_suite(tmp_path: Path, records: list[dict[str, object]], keys: str = "") -> Path:
    """The 20 `records` beside 10 short requests of their own, as a [[trace]] suite."""
    records = records + [
        {"messages": [{"role": "user", "content": f"Say {i}."}], "expected": str(i), "task": "chat"}
        for i in range(10)
    ]
    trace = tmp_path / "support.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    suite = tmp_path / "bot.toml"
    suite.write_text(f'name = "bot"\n[[trace]]\npath = "{trace}"\nvalidator = "exact"\n{keys}')
    return suite


def _behind(system: str, request: Callable[[int], str], own_groups: bool = False) -> list[dict[str, object]]:
    """20 support requests behind one system prompt; `own_groups`: each record names its own group."""
    return [
        {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": request(i)}],
            "expected": f"order {i}",
            "task": "support",
            **({"prefix_group": f"ticket-{i}"} if own_groups else {}),
        }
        for i in range(20)
    ]


def _freeze(suite: Path, out: Path) -> Result:
    result = CliRunner().invoke(cli, ["freeze", str(suite), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return result


def test_a_short_system_prompt_before_distinct_requests_is_no_cluster_and_freeze_warns(
    tmp_path: Path,
) -> None:
    """The default prefix_min_share (0.5): the shared ~150 tokens are about a third of each ~460-token
    prompt, so each request is its own cluster, and freeze names the shared prefix and how to count it as
    one cluster."""
    out = tmp_path / "w.parquet"
    result = _freeze(_trace_suite(tmp_path, _behind(SHORT_SYSTEM, _request)), out)
    assert "clusters: 30 cases in 30 clusters (no prefix groups: every case is its own)" in result.stdout
    assert "; shared prefix 'trace-" in result.stdout and ": 20 cases counted as 20 clusters" in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert re.match(
        r"warning: shared prefix 'trace-[0-9a-f]{12}' \(suite 'bot', task 'support'\) holds 20 of 30 cases "
        r"\(67%\), but it is only 3\d% of their prompts, under prefix_min_share: the gate counts them as 20 "
        r"clusters",
        warning,
    ), warning
    assert "set prefix_min_share = 0" in warning
    cases = read_workload(out).cases
    assert {c.prefix_group for c in cases} == {None}
    assert len({c.slices.get("shared_prefix") for c in cases if c.task == "support"}) == 1
    assert all("shared_prefix" not in c.slices for c in cases if c.task == "chat")
    checked = CliRunner().invoke(cli, ["freeze", "--check", str(out)])
    assert "30 cases in 30 clusters" in checked.stdout and "warning: shared prefix 'trace-" in checked.stderr


def test_declared_prefix_min_share_0_makes_the_short_system_prompt_one_cluster(tmp_path: Path) -> None:
    result = _freeze(
        _trace_suite(tmp_path, _behind(SHORT_SYSTEM, _request), "prefix_min_share = 0\n"),
        tmp_path / "w.parquet",
    )
    assert "clusters: 30 cases in 11 clusters (1 prefix group: 1 × 20 cases; 10 alone)" in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith("warning: prefix group 'trace-") and "shared prefix is 3" in warning


def test_a_shared_prefix_that_is_most_of_each_prompt_stays_one_cluster_and_freeze_warns(
    tmp_path: Path,
) -> None:
    """A long shared prompt before short requests (as the reuse suite's documents before their questions)
    is one cluster under the default prefix_min_share."""
    out = tmp_path / "w.parquet"
    result = _freeze(_trace_suite(tmp_path, _behind(SYSTEM, lambda i: f"Order {i}?")), out)
    assert "clusters: 30 cases in 11 clusters (1 prefix group: 1 × 20 cases; 10 alone)" in result.stdout
    assert "holds 20 cases (67%)" in result.stdout and "shared prefix '" not in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith("warning: prefix group 'trace-") and "(suite 'bot', task 'support')" in warning
    assert "holds 20 of 30 cases (67%; their shared prefix is 9" in warning and 'cluster = "none"' in warning
    checked = CliRunner().invoke(cli, ["freeze", "--check", str(out)])
    assert "30 cases in 11 clusters" in checked.stdout and "warning: prefix group 'trace-" in checked.stderr


def test_records_with_their_own_prefix_groups_are_independent_and_draw_no_warning(tmp_path: Path) -> None:
    result = _freeze(
        _trace_suite(tmp_path, _behind(SYSTEM, lambda i: f"Order {i}?", own_groups=True)),
        tmp_path / "w.parquet",
    )
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
