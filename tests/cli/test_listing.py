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
    result = CliRunner().invoke(cli, ["engines"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for name in ("hf", "vllm", "fake", "sglang", "trtllm", "llama-server"):
        assert name in result.output


def test_engines_lists_what_each_engine_and_flavour_applies_as_their_checks_say() -> None:
    """Each row is what the engine's or the flavour's own refusals let through: vLLM's KV dtypes as its
    arm check (on a GPU and on CPU), each flavour's kinds, dtypes, reuse and offload as its refusal."""
    import json

    from kvgate.engines.server.flavours.registry import FLAVOURS
    from kvgate.engines.vllm.args import VLLMPlatform, arm_refusal, cpu_kv_dtype_refusals
    from kvgate.treatments.spec import KV_DTYPES, Composite, Offload, Quantize, Reuse

    listed = json.loads(CliRunner().invoke(cli, ["engines", "--json"]).stdout)
    engines = {r["name"]: r for r in listed["engines"]}
    gpu = VLLMPlatform("cuda", None, {}, frozenset())
    cpu = VLLMPlatform("cpu", "no offload on CPU", cpu_kv_dtype_refusals(), frozenset())
    on_gpu = [d for d in KV_DTYPES if arm_refusal(Quantize("q", dtype=d), gpu) is None]
    on_cpu = [d for d in KV_DTYPES if arm_refusal(Quantize("q", dtype=d), cpu) is None]
    assert on_cpu == ["fp8_e4m3", "fp8_e5m2"] and len(on_gpu) == 10
    assert engines["vllm"]["kv dtypes"] == f"{', '.join(on_gpu)} (on CPU: {', '.join(on_cpu)})"
    assert engines["llamacpp"]["kv dtypes"].split(", ")[3:5] == ["q8_0", "q4_0"]
    assert "turboquant_k8v4" not in engines["hf"]["kv dtypes"]
    flavours = {r["flavour"]: r for r in listed["server flavours (-E flavour=NAME)"]}
    assert set(flavours) == set(FLAVOURS)
    for name, row in flavours.items():
        refusal = FLAVOURS[name].refusal
        mapped = [d for d in KV_DTYPES if refusal(Quantize("q", dtype=d)) is None]
        assert row["kv dtypes"].startswith(mapped[0]) and all(d in row["kv dtypes"] for d in mapped)
        tiers = [
            t
            for t in ("host", "disk")
            if refusal(Composite("c", of=(Reuse("r"), Offload("o", tier=t)))) is None
        ]
        assert row["offload"] == (", ".join(tiers) or "refused")
        assert ("reuse" in row["treatment kinds"]) == (refusal(Reuse("r")) is None)
    assert flavours["trtllm"]["offload"] == "host" and "fp8_e4m3 (fp8)" in flavours["trtllm"]["kv dtypes"]
    assert flavours["sglang"]["kv_blocks"] == "refused" and "max_tokens" in flavours["trtllm"]["kv_blocks"]
    assert "meta_info.cached_tokens" in flavours["sglang"]["proof counters"]


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
        ("models", "status"),
        ("validators", "name"),
    ):
        result = runner.invoke(cli, [command, "--json"])
        rows = json.loads(result.stdout)
        assert result.exit_code == 0 and rows and all(key in r for r in rows), command
    engines = json.loads(runner.invoke(cli, ["engines", "--json"]).stdout)
    assert (
        all("status" in r for r in engines["engines"])
        and len(engines["server flavours (-E flavour=NAME)"]) == 3
    )
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
    assert len(short.splitlines()) < 50 < len(full.splitlines())
    assert "quick gate" not in short and "quick" in full


def test_engine_tables_of_reuse_offload_and_proof_are_what_is_checked_and_counted() -> None:
    """The engines' reuse modes and offload tiers are what `check_capable` refuses before any engine
    loads (and agree with vLLM's own arm check on a GPU); every proof counter listed is a row field."""
    import dataclasses
    import re

    from kvgate.engines.base import Generation
    from kvgate.engines.capability import missing_kinds
    from kvgate.engines.registry import ENGINES
    from kvgate.engines.vllm.args import VLLMPlatform, arm_refusal
    from kvgate.treatments.spec import Composite, Offload, Reuse

    fields = {f.name for f in dataclasses.fields(Generation)}
    gpu = VLLMPlatform("cuda", None, {}, frozenset())
    for name, info in ENGINES.items():
        for mode in ("prefix", "span"):
            assert (missing_kinds(name, Reuse("r", mode=mode)) == []) == (mode in info.reuse_modes), name
        for tier in ("host", "disk"):
            arm = Composite("c", of=(Reuse("r"), Offload("o", tier=tier)))
            assert (missing_kinds(name, arm) == []) == (tier in info.offload_tiers), name
            if name == "vllm":
                assert (arm_refusal(arm, gpu) is None) == (tier in info.offload_tiers)
        assert {kind for kind, _ in info.proof} == set(info.kinds) - {"full", "composite"}, name
        for _, counters in info.proof:
            assert set(re.sub(r" \(.*?\)", "", counters).split(", ")) <= fields, counters
    assert arm_refusal(Reuse("r", mode="span"), gpu) is not None and "span reuse" in missing_kinds(
        "vllm", Reuse("r", mode="span")
    )
