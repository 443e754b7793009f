"""What a suite holds, without a model: its case count, tasks and slice columns (`kvgate suites`).

Generator entries are drafted with the model-free `WordTokenizer`: their grid, tasks and slice labels do
not depend on the tokenizer, only the prompts' lengths in words do. `[[dataset]]` and `[[trace]]` entries
are not read (a dataset may live on the hub); they are named instead, and counted when frozen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kvgate.workload.suites import SuiteSpec
from kvgate.workload.tokenizer import WordTokenizer

DATA_ENTRIES = ("dataset", "trace")


@dataclass(frozen=True)
class SuiteSummary:
    cases: int
    """Cases of the generator entries."""
    tasks: tuple[str, ...]
    slice_columns: tuple[str, ...]
    data_entries: tuple[str, ...]
    """The kinds of the entries not read ("dataset", "trace"), one per entry."""


def summarize(spec: SuiteSpec) -> SuiteSummary:
    tok = WordTokenizer()
    cases, data = 0, []
    tasks: set[str] = set()
    slices: set[str] = set()
    for index, entry in enumerate(spec.entries):
        if entry.generator.name in DATA_ENTRIES:
            data.append(entry.generator.name)
            continue
        drafts = entry.generator.generate(entry.params, random.Random(f"0:{spec.name}:{index}"), tok)
        cases += len(drafts)
        tasks.update(d.task for d in drafts)
        slices.update(key for d in drafts for key in d.slices)
    columns = ("task", *sorted(slices - {"task"})) if cases else ()
    return SuiteSummary(cases, tuple(sorted(tasks)), columns, tuple(data))


def cases_label(summary: SuiteSummary) -> str:
    """E.g. "24", "— (1 dataset)", "120 + 1 trace"."""
    if not summary.data_entries:
        return str(summary.cases)
    kinds = sorted(set(summary.data_entries))
    data = ", ".join(f"{summary.data_entries.count(k)} {k}" for k in kinds)
    return f"{summary.cases} + {data}" if summary.cases else f"— ({data})"
