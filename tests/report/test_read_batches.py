"""analysis.run_data.in_batches: the parts' reads handed to the thread pool in a few batches of
consecutive parts, with the results in the parts' order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kvgate.report.analysis.run_data import BATCHES_PER_THREAD, THREADS, in_batches


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
