"""analysis.run_data.groups_of: the parts whose texts are split off together are consecutive, of one arm,
at most SPLIT_PARTS."""

from __future__ import annotations

from pathlib import Path

from kvgate.report.analysis.run_data import SPLIT_PARTS, groups_of


def test_text_groups_are_consecutive_parts_of_one_arm() -> None:
    paths = [
        Path(f"results/{arm}/part-{i:05d}.parquet") for arm, n in (("a", 40), ("b", 3)) for i in range(n)
    ]
    indices = [i for i in range(len(paths)) if i != 20]  # a gap: part 20 read with the other arm's
    groups = groups_of(indices, paths)
    assert [i for g in groups for i in g] == indices
    for group in groups:
        assert len(group) <= SPLIT_PARTS
        assert group == list(range(group[0], group[0] + len(group)))
        assert len({paths[i].parent for i in group}) == 1
    assert [len(g) for g in groups] == [16, 4, 16, 3, 3]
