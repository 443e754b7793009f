"""What a new user met following the README in a fresh clone, each mended: `python -m kvgate`, listing
and simulate tables that cut or swallowed text when piped, a report line naming a slice its table shows,
a README example the pre-run check refused, and an init whose suite freeze refused."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from helpers.cli import kvgate

from kvgate import __version__
from kvgate.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workloads import shared_prompt_trace

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_kvgate_is_the_command_line() -> None:
    argv = [sys.executable, "-m", "kvgate", "--version"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert (out.returncode, out.stdout.strip()) == (0, f"kvgate, version {__version__}"), out.stderr


def test_listings_piped_keep_every_word_and_every_bracket() -> None:
    """Piped without COLUMNS a listing is 120 columns wide, as a report is (it was rich's 80, cutting
    cells to "longbench-2w…"); a narrow one folds cells rather than cutting them; and text in brackets
    is text, not markup (the composite's `of = [two or more treatment names, …]` was swallowed)."""
    suites = CliRunner().invoke(cli, ["suites"], env={"COLUMNS": None}).output
    assert max(map(len, suites.splitlines())) == 120 and "longbench-2wikimqa" in suites
    treatments = CliRunner().invoke(cli, ["treatments"], env={"COLUMNS": "250"}).output
    assert "of = [two or more treatment names, each kind once]" in treatments
    narrow = CliRunner().invoke(cli, ["engines"], env={"COLUMNS": "80"}).output
    assert "engines" in narrow and "…" not in narrow  # rich cut "llamacpp" to "llamac…" here


def test_simulate_shows_the_policys_strata() -> None:
    out = kvgate("simulate", "--n", "24", "--runs", "20").output
    assert "strata=[ctx_bucket]" in out  # rich took "[ctx_bucket]" for markup and printed "strata="


def test_the_left_out_line_names_only_what_the_table_leaves_out(tmp_path: Path) -> None:
    """20 requests of one length: ctx_bucket has one value, but it is gated (strata), so its row stays in
    the table; the line names the single-valued signals it leaves out, not the gated row."""
    workload = shared_prompt_trace(tmp_path)
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n')
    run = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", tmp_path / "runs")
    table = run.stdout
    (bucket,) = set(re.findall(r"^ (ctx_bucket=\S+) ★", table, re.MULTILINE))
    (line,) = [x for x in table.splitlines() if "not in the table:" in x]
    assert bucket not in line and "task=trace" in line and "turns=1" in line, line


def test_the_readmes_policy_flags_example_is_not_refused(tmp_path: Path) -> None:
    """The README's `--tau … --critical …` example, on the suite it names (frozen with the word
    tokenizer for the fake engine): its critical slice can pass, so the run is not refused (exit 2)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"^kvgate run -w (\w+)\.parquet (--tau \S+ --critical \S+)", readme, re.MULTILINE)
    suite, flags = example
    workload = tmp_path / f"{suite}.parquet"
    assert kvgate("freeze", suite, "-o", workload).exit_code == 0
    runs = tmp_path / "runs"
    run = kvgate("run", "--engine", "fake", "-w", workload, *flags.split(), "-o", runs, "--quiet")
    assert run.exit_code in (0, 1, 3), run.output


def test_run_help_names_every_engine() -> None:
    """`kvgate run --help` listed hf, vllm, server and fake, not the llamacpp engine the README names."""
    from kvgate.engines.registry import ENGINES

    shown = " ".join(kvgate("run", "--help").output.split())
    assert " | ".join(ENGINES.names()) in shown and "llamacpp" in shown


def test_a_run_that_does_not_exist_is_named_so(tmp_path: Path) -> None:
    """`kvgate report nosuch` said "nosuch is not a kvgate run: no manifest.json", as for a folder that
    holds something else."""
    missing = tmp_path / "nosuch"
    for args in (["report", missing], ["run", "--resume", missing], ["view", missing]):
        result = kvgate(*args)
        assert result.exit_code == 2
        assert (
            result.stderr
            == f"kvgate: error: run {missing} does not exist; `kvgate runs [RUNS_DIR]` lists the runs\n"
        )
    assert "is not a kvgate run: no manifest.json" in kvgate("report", tmp_path).stderr
