"""The fake engine's `only_slice`: planted failures restricted to one slice (as the policy names it),
validated with a one-line error when the name is malformed or no case of the run is in the slice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kvgate.cli import cli
from kvgate.engines.base import ArmSetup
from kvgate.engines.fake import check_fault_slices
from kvgate.engines.registry import create_engine
from kvgate.errors import BadInput
from kvgate.models import resolve_model
from kvgate.treatments.faults import check_faults
from kvgate.treatments.spec import Quantize
from kvgate.validators.registry import get_validator
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload

FP8 = Quantize("fp8")


@pytest.fixture(scope="module")
def cases(smoke_workload: Path) -> tuple[Case, ...]:
    return read_workload(smoke_workload).cases  # 12 passkey cases at ctx_bucket 512, 12 at 1k


def _failed(cases: tuple[Case, ...], **faults: Any) -> list[bool]:
    engine = create_engine("fake", resolve_model("smollm2-135m"))
    setup = ArmSetup(arm="fp8", replicate=0, treatment=FP8, namespace="ns", faults=faults)
    gens = engine.open(setup).generate(cases)
    return [
        g.error is not None
        or not get_validator(c.validator)(g.output_text, c.expected, c.validator_args).passed
        for c, g in zip(cases, gens, strict=True)
    ]


def test_failures_land_only_in_the_named_slice(cases: tuple[Case, ...]) -> None:
    in_1k = [c.slices["ctx_bucket"] == "1k" for c in cases]
    assert _failed(cases, wrong_answer_rate=1.0, only_slice="ctx_bucket=1k") == in_1k
    assert _failed(cases, error_rate=1.0, only_slice="task=passkey/ctx_bucket=512") == [not s for s in in_1k]
    # within the slice the rate hits the same cases it hits without only_slice
    everywhere = _failed(cases, wrong_answer_rate=0.5)
    restricted = _failed(cases, wrong_answer_rate=0.5, only_slice="ctx_bucket=1k")
    assert restricted == [f and s for f, s in zip(everywhere, in_1k, strict=True)]
    assert any(restricted) and not all(f for f, s in zip(restricted, in_1k, strict=True) if s)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ctx_bucket", "only_slice: slice 'ctx_bucket' must be 'all', 'critical' or column=value"),
        ("ctx_bucket=4k/ctx_bucket=1k", "names a column twice"),
        (4, "only_slice must be a slice name such as 'ctx_bucket=4k', got 4"),
    ],
)
def test_a_malformed_slice_is_a_one_line_error(value: object, message: str) -> None:
    with pytest.raises(BadInput, match=r"^m.toml \[faults.fp8\]: ") as info:
        check_faults({"only_slice": value}, "m.toml [faults.fp8]")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_slice_no_case_is_in_is_refused(cases: tuple[Case, ...]) -> None:
    check_fault_slices({"fp8": {"only_slice": "ctx_bucket=1k"}}, cases, "workload w")
    with pytest.raises(
        BadInput, match=r"^\[faults.\*\] only_slice 'bucket=4k': workload w has no slice column"
    ):
        check_fault_slices({"*": {"only_slice": "bucket=4k"}}, cases, "workload w")
    with pytest.raises(BadInput, match=r"only_slice 'ctx_bucket=4k': no case of workload w is in that slice"):
        check_fault_slices({"fp8": {"only_slice": "ctx_bucket=4k"}}, cases, "workload w")


def _run(tmp_path: Path, workload: Path, only: str) -> Result:
    tmp_path.mkdir(parents=True, exist_ok=True)
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n'
        f'[faults.fp8-e4m3]\nwrong_answer_rate = 1.0\nonly_slice = "{only}"\n'
    )
    args = ["run", "--engine", "fake", "-w", str(workload), "-m", str(matrix), "-o", str(tmp_path / "runs")]
    return CliRunner().invoke(cli, [*args, "--json"])


def test_end_to_end_the_report_shows_the_slice_failing_and_the_other_clean(
    smoke_workload: Path, tmp_path: Path
) -> None:
    result = _run(tmp_path, smoke_workload, "ctx_bucket=1k")
    assert result.exit_code == 1, result.output  # 12 of 24 failing fails the arm
    (arm,) = json.loads(result.stdout)["arms"]
    failing = {
        s["slice"]: s["cache_induced_failures"] for s in arm["slices"] if s["slice"].startswith("ctx_bucket=")
    }
    assert failing == {"ctx_bucket=512": 0, "ctx_bucket=1k": 12}
    refused = _run(tmp_path / "b", smoke_workload, "ctx_bucket=4k")
    assert refused.exit_code == 2
    assert refused.output.strip().endswith(
        "only_slice 'ctx_bucket=4k': no case of workload " + str(smoke_workload) + " is in that slice"
    )
