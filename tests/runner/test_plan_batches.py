"""A pass's batches: cases ordered by prompt length when batches hold more than one (so a mixed suite
gives the hf engine equal-length batches), the workload's order for a reuse arm and for batches of one."""

from __future__ import annotations

from kvgate.runner.passes import ArmRun
from kvgate.runner.run import plan_batches
from kvgate.treatments.spec import Full, Reuse
from kvgate.workload.case import Case


def _cases(lengths: list[int]) -> tuple[Case, ...]:
    messages = ({"role": "user", "content": "q"},)
    return tuple(
        Case(f"c{i}", "s", "t", messages, 8, "exact", "a", {}, None, False, {}, (1,) * n, n)
        for i, n in enumerate(lengths)
    )


def test_batches_group_equal_lengths_and_keep_order_within_them() -> None:
    cases = _cases([5, 9, 5, 7, 9, 5, 7])
    ids = {c.case_id for c in cases} - {"c3"}  # c3 already stored
    batches = plan_batches(ArmRun(Full("full"), 0, 0, cases), ids, 2)
    assert [[c.case_id for c in b] for b in batches] == [["c0", "c2"], ["c5", "c6"], ["c1", "c4"]]
    one = plan_batches(ArmRun(Full("full"), 0, 0, cases), ids, 1)
    assert [c.case_id for b in one for c in b] == ["c0", "c1", "c2", "c4", "c5", "c6"]


def test_a_reuse_arm_keeps_the_workload_order() -> None:
    cases = _cases([5, 9, 5, 7])
    batches = plan_batches(ArmRun(Reuse("prefix"), 0, 0, cases), {"c2"}, 2)
    assert [[c.case_id for c in b] for b in batches] == [["c0", "c1"], ["c2", "c3"]]
