"""`kvgate treatments` lists what each treatment kind offers: methods, parameters and their defaults."""

from __future__ import annotations

from dataclasses import fields

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.cli.treatment_kinds import defaults, kind_rows, relevant
from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import EVICTION_METHOD_NAMES, TREATMENT_TYPES, Eviction


def test_every_eviction_method_and_kind_is_listed_with_real_parameters() -> None:
    assert tuple(EVICTION_METHODS) == EVICTION_METHOD_NAMES
    spec_fields = {f.name for f in fields(Eviction)}
    assert all(set(info.params) <= spec_fields for info in EVICTION_METHODS.values())
    rows = kind_rows()
    assert {r[0] for r in rows} == set(TREATMENT_TYPES)
    assert [r[1] for r in rows if r[0] == "eviction"] == list(EVICTION_METHOD_NAMES)
    assert defaults("eviction")["window"] == Eviction("x").window == 32


def test_the_command_shows_methods_parameters_and_defaults() -> None:
    result = CliRunner().invoke(cli, ["treatments"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    h2o = next(line for line in lines if "│ h2o " in line)
    assert "window=32" in h2o and "ratio=0.5" in h2o and "scope=prompt (prompt | context)" in h2o
    tova = next(line for line in lines if "│ tova " in line)
    assert "window" not in tova and "TOVA" in tova
    assert "dtype=fp8_e4m3 (fp8_e4m3 | fp8_e5m2 | f32 | f16 | bf16 | q8_0 | q4_0 | q4_1" in result.output
    assert "int8_per_token_head" in result.output and "nvfp4" in result.output
    assert "dtype_v=None (f32 | f16" in result.output
    streaming = next(line for line in lines if line.startswith("│ streaming-50 "))
    assert "sink_tokens=4" in streaming and "window" not in streaming  # only what the method reads


def test_relevant_keeps_other_kinds_whole() -> None:
    assert relevant({"kind": "quantize", "dtype": "fp8_e4m3"}) == {"kind": "quantize", "dtype": "fp8_e4m3"}


def test_each_method_class_takes_the_parameters_the_table_maps() -> None:
    """Each method's dataclass (engines/hf/eviction/, read as syntax: no torch) has a field for every
    parameter the table maps a spec field to, and ratio."""
    import ast
    from pathlib import Path

    import kvgate

    for name, info in EVICTION_METHODS.items():
        module, _, cls = info.method.partition(":")
        path = Path(kvgate.__file__).parents[1] / f"{module.replace('.', '/')}.py"
        (node,) = [
            n for n in ast.parse(path.read_text(encoding="utf-8")).body if getattr(n, "name", "") == cls
        ]
        assert isinstance(node, ast.ClassDef), name
        taken = {
            s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }
        assert {"ratio", *info.params.values()} <= taken, name


def test_each_listed_choice_set_is_the_one_the_checks_read() -> None:
    """The values `kvgate treatments` lists for a field are its Literal type's: each one is accepted, and
    anything else is refused naming the field."""
    from kvgate.cli.treatment_kinds import CHOICES

    assert {k for k, _ in CHOICES} == {"eviction", "quantize", "offload", "reuse"}
    assert CHOICES["offload", "tier"] == ("host", "disk") and CHOICES["reuse", "mode"] == ("prefix", "span")
    assert CHOICES["eviction", "method"] == EVICTION_METHOD_NAMES
    for (kind, name), values in CHOICES.items():
        spec = TREATMENT_TYPES[kind]
        for value in values:
            needs_ggml = kind == "quantize" and (name == "dtype_v" or value == "block")
            extra = {"dtype": "q8_0"} if needs_ggml else {}
            assert getattr(spec("x", **{**extra, name: value}), name) == value
        with pytest.raises(ValueError, match=name):
            spec("x", **{name: "no-such-value"})
