"""`kvgate suites | treatments | engines | models` list what is available here."""

from __future__ import annotations

from click.testing import CliRunner

from kvgate.cli import cli


def test_suites_lists_smoke() -> None:
    result = CliRunner().invoke(cli, ["suites"])
    assert result.exit_code == 0
    assert "smoke" in result.output and "passkey" in result.output


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
