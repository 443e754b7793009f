"""`kvgate run` of a matrix given as text, in-process, as the server engine's tests call it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from kvgate.cli import cli


def run_matrix(
    folder: Path, matrix_text: str, workload: Path, model: Path, *extra: str, name: str = "matrix"
) -> Result:
    """`kvgate run -w workload -m folder/<name>.toml --model model -o folder/runs EXTRA…`, the matrix file
    written from `matrix_text` first (its stem names the matrix)."""
    matrix = folder / f"{name}.toml"
    matrix.write_text(matrix_text)
    argv = ["run", "-w", str(workload), "-m", str(matrix), "--model", str(model), "-o", str(folder / "runs")]
    return CliRunner().invoke(cli, [*argv, *extra])
