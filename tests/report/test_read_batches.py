"""analysis.run_data.in_batches: the parts' reads handed to the thread pool in a few batches of
consecutive parts, with the results in the parts' order; groups_of: the parts whose texts are split off
together are consecutive, of one arm, at most SPLIT_PARTS."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kvgate.report.analysis.run_data import BATCHES_PER_THREAD, SPLIT_PARTS, THREADS, groups_of, in_batches


class CountingPool(ThreadPoolExecutor):
    """A thread pool that counts the tasks handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=THREADS)
        self.tasks = 0

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self.tasks += 1
        return super().submit(*args, **kwargs)


def test_results_come_in_order_from_a_few_tasks() -> None:
    limit = BATCHES_PER_THREAD * THREADS
    for n in (0, 1, 2, 7, limit, limit + 1, 980):
        items = list(range(n))
        with CountingPool() as pool:
            assert in_batches(pool, lambda i: i * i, items) == [i * i for i in items]
        assert pool.tasks == n if n <= limit else 1 < pool.tasks <= limit  # one task per item, at most


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
