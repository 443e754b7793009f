"""The certificate's settings in a treatment spec and its summary in the result rows: strict settings,
fingerprints of arms without it unchanged, the columns stored, and parts stored before them still read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvgate.engines.base import Generation
from kvgate.errors import BadInput
from kvgate.report.analysis.run_data import report_columns
from kvgate.rundir.result_part import (
    CERTIFICATE_COLUMNS,
    RESULT_SCHEMA,
    RESULT_SCHEMA_V1,
    RESULT_SCHEMA_V2,
)
from kvgate.rundir.store import read_results
from kvgate.runner.passes import ArmRun
from kvgate.runner.rows import result_row
from kvgate.treatments.matrix import parse_treatment
from kvgate.treatments.spec import Eviction
from kvgate.workload.case import Case


def test_an_arm_without_the_certificate_keeps_its_spec_and_fingerprint() -> None:
    plain = Eviction("streaming-50", method="streaming", ratio=0.5)
    assert plain.fingerprint() == "706de491cf2eb727"  # as stored by runs made before the certificate
    assert not any(key.startswith("certificate") for key in plain.to_dict())
    certified = Eviction("streaming-50", method="streaming", ratio=0.5, certificate=True)
    assert certified.to_dict()["certificate_share"] == 0.1
    assert certified.fingerprint() != plain.fingerprint()


@pytest.mark.parametrize(
    "settings",
    [{"certificate_share": 0.0}, {"certificate_floor": 1.5}, {"certificate_confidence": 1.0}],
)
def test_bad_settings_are_refused(settings: dict) -> None:
    with pytest.raises(ValueError, match="certificate"):
        Eviction("e", certificate=True, **settings)


def test_a_matrix_names_the_certificate_with_typed_keys() -> None:
    tables = {"s": {"kind": "eviction", "method": "snapkv", "certificate": True, "certificate_share": 0.2}}
    treatment = parse_treatment("s", tables, "m.toml")
    assert isinstance(treatment, Eviction) and treatment.certificate and treatment.certificate_share == 0.2
    with pytest.raises(BadInput, match="certificate"):
        parse_treatment("s", {"s": {"kind": "eviction", "certificate": "yes"}}, "m.toml")


def test_rows_carry_the_certificate_summary() -> None:
    case = Case("c1", "s", "t", (), 4, "exact", "7", {}, None, False, {}, (1, 2), 2)
    gen = Generation("7", (7,), 10, 0, 5, 0.1, 0.2, -0.1, -0.2, None, 0.9, 0.3, 0.1)
    gen = dataclasses.replace(
        gen,
        certificate_relative_bound_mean=0.6,
        certificate_relative_estimate_mean=0.2,
        certificate_cap_share=0.25,
    )
    row = result_row(case, gen, ArmRun(Eviction("e", certificate=True), 0, 0, (case,)), [7])
    assert [row[c] for c in CERTIFICATE_COLUMNS] == [0.9, 0.3, 0.1, 0.6, 0.2, 0.25]
    table = pa.Table.from_pylist([row], schema=RESULT_SCHEMA)
    assert table.column("certificate_bound_max").to_pylist() == [0.9]


@pytest.mark.parametrize("version", [1, 2])
def test_parts_stored_before_the_certificate_columns_still_read(tmp_path: Path, version: int) -> None:
    schema = RESULT_SCHEMA_V1 if version == 1 else RESULT_SCHEMA_V2
    row: dict[str, object] = {f.name: None for f in schema}
    row.update(case_id="c1", arm="full", replicate=0, attempt=0, passed=True, output_token_ids=[1])
    if version == 2:
        row["certificate_bound_max"] = 0.5
    part = tmp_path / "results" / "full" / "part-00000.parquet"
    part.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=schema), part)
    table = read_results(tmp_path)
    assert table.schema.equals(RESULT_SCHEMA, check_metadata=False)
    assert table.column("certificate_bound_max").to_pylist() == [0.5 if version == 2 else None]
    assert table.column("certificate_relative_bound_mean").to_pylist() == [None]
    report_table = report_columns(part)
    assert report_table.column("case_id").to_pylist() == ["c1"]
    assert report_table.column("certificate_cap_share").to_pylist() == [None]


def test_the_fake_engine_refuses_the_certificate() -> None:
    from kvgate.engines.fake import FakeEngine
    from kvgate.models import resolve_model

    engine = FakeEngine(resolve_model("smollm2-135m"))
    assert "hf engine" in (engine.refusal(Eviction("e", certificate=True)) or "")
    assert engine.refusal(Eviction("e")) is None
