"""Runs as pandas DataFrames, for notebooks (as inspect's `evals_df` and `samples_df` are for its logs).

    from kvgate.analysis import runs_df, pairs_df, slices_df
    runs_df("runs")                  # one row per run: id, created, matrix, engine, model, decision
    pairs_df("runs/<id>")            # one row per (candidate, case): slices, answers, verdicts, outcome
    slices_df("runs/<id>")           # the report's slice table: one row per (candidate, slice)

Every frame is built from a verified run (as `kvgate report` verifies it: an edited run is refused with
BadInput) on its declared policy; pairs are the first attempts of replicate 0, as the gate counts them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def runs_df(runs_dir: str | Path = "runs") -> pd.DataFrame:
    """One row per run under `runs_dir` (analysis.runs_index.FIELDS, `path`, `note`), oldest first;
    `created_at` as a UTC timestamp."""
    import pandas as pd

    from kvgate.report.analysis.runs_index import FIELDS, list_runs

    frame = pd.DataFrame(list_runs(Path(runs_dir)), columns=[*FIELDS, "path", "note"])
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    return frame


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """A samples record with its labels as columns and each side's fields prefixed by the side."""
    row = {k: v for k, v in record.items() if k not in ("labels", "control", "candidate")}
    row |= record["labels"]
    for side in ("control", "candidate"):
        row |= {f"{side}_{key}": value for key, value in record[side].items()}
    return row


def pairs_df(run_dir: str | Path) -> pd.DataFrame:
    """One row per (candidate arm, case): `arm`, `case_id`, `source_id`, one column per slice,
    `prompt`, `expected`, `control_output`/`candidate_output`, `*_passed`, `*_fail_kind`, `*_detail`,
    `outcome` and `first_divergence` (analysis.samples)."""
    import pandas as pd

    from kvgate.report.analysis.build import verified_report
    from kvgate.report.analysis.run_data import read_cases
    from kvgate.report.analysis.samples import sample_records
    from kvgate.rundir.manifest import read_manifest

    path = Path(run_dir)
    _, rows = verified_report(path)
    manifest = read_manifest(path)
    cases = read_cases(manifest)
    return pd.DataFrame([_flat(r) for r in sample_records(manifest, cases, rows)])


def slices_df(run_dir: str | Path) -> pd.DataFrame:
    """The report's slice rows of every candidate arm (the report JSON's `arms[].slices`, its fields as
    columns), in report order."""
    import pandas as pd

    from kvgate.report.analysis.build import build_report

    report = build_report(Path(run_dir))
    return pd.DataFrame(
        [s.model_dump(mode="json", exclude={"labels"}) for arm in report.arms for s in arm.slices]
    )
