"""The abort-and-resubmit schedule is declared in the matrix (`abort_percent`), checked when it is read
and refused on engines that cannot cancel requests."""

from __future__ import annotations

from pathlib import Path

from runner_support import Invoke, write_matrix

from kvgate.treatments.matrix import parse_matrix

BODY = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\naa_replicate = false\n'


def test_abort_percent_is_read_per_arm_and_recorded_as_load(tmp_path: Path) -> None:
    matrix = parse_matrix(
        write_matrix(
            tmp_path / "m.toml", BODY + "abort_percent = 10\n[arm.prefix-reuse]\nabort_percent = 30\n"
        )
    )
    assert (matrix.abort_percent_for("full"), matrix.abort_percent_for("prefix-reuse")) == (10, 30)
    assert matrix.load_for("prefix-reuse") == {"abort_percent": 30}
    assert parse_matrix(write_matrix(tmp_path / "n.toml", BODY)).load_for("full") == {}


def test_a_bad_share_or_an_engine_that_cannot_abort_is_refused(
    kvgate: Invoke, accept_workload: Path, tmp_path: Path
) -> None:
    over = write_matrix(tmp_path / "over.toml", BODY + "abort_percent = 101\n")
    result = kvgate("run", "--engine", "fake", "-w", accept_workload, "-m", over, "-o", tmp_path / "runs")
    assert result.exit_code == 2 and "abort_percent must be in [0, 100], got 101" in result.stderr
    fake = write_matrix(tmp_path / "fake.toml", BODY + "[arm.prefix-reuse]\nabort_percent = 25\n")
    result = kvgate("run", "--engine", "fake", "-w", accept_workload, "-m", fake, "-o", tmp_path / "runs")
    assert result.exit_code == 2 and "cannot cancel requests mid-generation" in result.stderr
    assert not list((tmp_path / "runs").glob("*/manifest.json"))
