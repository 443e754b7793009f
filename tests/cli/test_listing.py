"""`kvgate suites | treatments | engines | models` list what is available here."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli


def test_suites_lists_case_counts_tasks_and_slice_columns() -> None:
    result = CliRunner().invoke(cli, ["suites"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    (smoke,) = [line for line in result.output.splitlines() if line.startswith("│ smoke ")]
    cells = [c.strip() for c in smoke.strip("│").split("│")]
    assert cells[:4] == ["smoke", "24", "passkey", "task, ctx_bucket, depth_bucket"]
    (longbench,) = [line for line in result.output.splitlines() if line.startswith("│ longbench-2wikimqa ")]
    assert "— (1 dataset)" in longbench


def test_summary_counts_generated_cases_and_names_data_entries(tmp_path: Path) -> None:
    from kvgate.workload.suite_summary import cases_label, summarize
    from kvgate.workload.suites import parse_suite

    spec = tmp_path / "mixed.toml"
    spec.write_text(
        'name = "mixed"\n[[generate]]\ngenerator = "passkey"\nlengths = [256]\ndepths = [0.5]\n'
        'per_cell = 3\n[[trace]]\npath = "t.jsonl"\n'
    )
    summary = summarize(parse_suite(spec))
    assert (summary.cases, summary.tasks, summary.data_entries) == (3, ("passkey",), ("trace",))
    assert cases_label(summary) == "3 + 1 trace"


def test_treatments_lists_catalog_and_matrices() -> None:
    result = CliRunner().invoke(cli, ["treatments"])
    assert result.exit_code == 0, result.output
    for name in ("streaming-50", "fp8-e4m3", "snapkv-50+fp8", "default"):
        assert name in result.output


def test_engines_lists_every_engine() -> None:
    result = CliRunner().invoke(cli, ["engines"])
    assert result.exit_code == 0
    for name in ("hf", "vllm", "fake"):
        assert name in result.output


def test_models_lists_the_embedded_model() -> None:
    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0
    assert "smollm2-135m" in result.output


def test_unknown_command_suggests() -> None:
    result = CliRunner().invoke(cli, ["frezee"])
    assert result.exit_code == 2
    assert "did you mean 'freeze'?" in result.output


def test_every_listing_has_json() -> None:
    import json

    runner = CliRunner()
    for command, key in (
        ("suites", "name"),
        ("engines", "status"),
        ("models", "status"),
        ("validators", "name"),
    ):
        result = runner.invoke(cli, [command, "--json"])
        rows = json.loads(result.stdout)
        assert result.exit_code == 0 and rows and all(key in r for r in rows), command
    listed = json.loads(runner.invoke(cli, ["treatments", "--json"]).stdout)
    assert set(listed) == {"treatment kinds", "treatments", "matrices"}
    assert "default" in [m["name"] for m in listed["matrices"]]
    suites = {r["name"]: r for r in json.loads(runner.invoke(cli, ["suites", "--json"]).stdout)}
    assert suites["smoke"]["cases"] == "24" and suites["smoke"]["description"].endswith("quick gate.")


def test_validators_lists_what_a_case_may_name() -> None:
    import json

    from kvgate.validators.registry import validator_names

    rows = json.loads(CliRunner().invoke(cli, ["validators", "--json"]).stdout)
    assert [r["name"] for r in rows] == validator_names() and "substring_any" in validator_names()
    assert all(r["description"].startswith("Pass when") for r in rows)


def test_suites_shows_one_phrase_each_and_all_of_it_with_verbose() -> None:
    short = CliRunner().invoke(cli, ["suites"], env={"COLUMNS": "80"}).output
    full = CliRunner().invoke(cli, ["suites", "-v"], env={"COLUMNS": "80"}).output
    assert len(short.splitlines()) < 40 < len(full.splitlines())
    assert "quick gate" not in short and "quick" in full
