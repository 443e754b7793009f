"""`kvgate freeze` through the CLI: writing, checking, and bad input (exit 2, one line, nothing written)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli


def test_freeze_then_check(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(cli, ["freeze", "smoke", "-o", str(out), "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert "sha256" in result.output
    check = CliRunner().invoke(cli, ["freeze", "--check", str(out)])
    assert check.exit_code == 0
    assert "5 cases" in check.output


def test_unknown_suite_suggests_the_closest(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(cli, ["freeze", "smok", "-o", str(out)])
    assert result.exit_code == 2
    assert "unknown suite 'smok'; did you mean 'smoke'?" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_unknown_generator_key_names_the_key(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('name = "bad"\n[[generate]]\ngenerator = "passkey"\nlengths = [512]\ndepth = [0.5]\n')
    result = CliRunner().invoke(cli, ["freeze", str(spec), "-o", str(tmp_path / "w.parquet")])
    assert result.exit_code == 2
    assert "unknown key 'depth'; did you mean 'depths'?" in result.output


def test_check_of_a_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["freeze", "--check", str(tmp_path / "nope.parquet")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_check_of_a_suite_says_to_freeze_it_and_check_the_workload_instead(tmp_path: Path) -> None:
    """It said "… and pass that to -w", advice for `kvgate run`, not for --check, and asked for a
    --model the fake engine does not need."""
    suite = Path(__file__).resolve().parents[2] / "suites" / "smoke.toml"
    result = CliRunner().invoke(cli, ["freeze", "--check", str(suite)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"kvgate: error: workload {suite} is a suite, not a frozen workload: freeze it first with "
        f"`kvgate freeze {suite} -o WORKLOAD.parquet` (with `--model MODEL` for a model's tokens; the word "
        "tokenizer serves --engine fake) and give WORKLOAD.parquet instead\n"
    )


def test_check_beside_suites_or_output_is_refused_rather_than_freezing_nothing(tmp_path: Path) -> None:
    """`freeze smoke -o w.parquet --check old.parquet` checked old.parquet and exited 0, writing nothing."""
    old = tmp_path / "old.parquet"
    assert CliRunner().invoke(cli, ["freeze", "smoke", "-o", str(old), "--limit", "2"]).exit_code == 0
    new = tmp_path / "new.parquet"
    for args in (["smoke", "-o", str(new)], ["-o", str(new)], ["smoke"]):
        result = CliRunner().invoke(cli, ["freeze", *args, "--check", str(old)])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("kvgate: error: --check FILE verifies a frozen workload")
        assert len(result.stderr.splitlines()) == 1 and not new.exists()


def test_a_missing_key_of_an_entry_is_named_as_a_missing_key(tmp_path: Path) -> None:
    """It read "PasskeyParams.__init__() missing 1 required keyword-only argument: 'depths'"."""
    for entry, key in (
        ('[[generate]]\ngenerator = "passkey"\nlengths = [512]\n', "depths"),
        ('[[dataset]]\npath = "d.jsonl"\n', "fields"),
        ('[[trace]]\nvalidator = "exact"\n', "path"),
    ):
        spec = tmp_path / "s.toml"
        spec.write_text(f'name = "s"\n{entry}')
        result = CliRunner().invoke(cli, ["freeze", str(spec), "-o", str(tmp_path / "w.parquet")])
        assert result.exit_code == 2
        assert result.stderr.endswith(f"#1: missing key {key!r}\n"), result.stderr


def test_check_with_an_option_of_freezing_is_refused_rather_than_ignored(tmp_path: Path) -> None:
    """`freeze --check w.parquet --model M` (or --seed, --limit) checked the file as frozen and exited 0,
    as if the option had been applied."""
    frozen = tmp_path / "w.parquet"
    assert CliRunner().invoke(cli, ["freeze", "smoke", "-o", str(frozen), "--limit", "2"]).exit_code == 0
    for option, value in (("--model", "smollm2-135m"), ("--seed", "0"), ("--limit", "1")):
        result = CliRunner().invoke(cli, ["freeze", "--check", str(frozen), option, value])
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"kvgate: error: --check FILE verifies the workload as it was frozen; {option} applies only to "
            "freezing SUITES: leave it out\n"
        )
    assert CliRunner().invoke(cli, ["freeze", "--check", str(frozen)]).exit_code == 0
