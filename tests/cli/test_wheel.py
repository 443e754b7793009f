"""The built wheel on its own: installed into a fresh virtualenv and run from a folder outside the
checkout, it holds every shipped file of the top-level `suites/`, `treatments/` and `reports/templates/`
under `kvgate/data/` and finds its suites, matrices, policy and report template there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FORMATS = ("table", "md", "html", "json", "junit")
SHIPPED = {"suites": "suites", "treatments": "treatments", "reports/templates": "reports"}
"""Each shipped folder of the checkout → where the wheel puts it below kvgate/data/."""


def _call(*argv: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding only the wheel; the dependencies come from this interpreter's
    site-packages through a .pth line (no index is reachable), which does not load the editable install."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy, so that the build writes nothing into the checkout
    for folder in ("kvgate", "suites", "treatments", "reports"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    env.pop("PYTHONPATH", None)
    built = _call(
        *pip, "wheel", source, "--no-deps", "--no-build-isolation", "-w", tmp / "dist", cwd=tmp, env=env
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("kvgate-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = _call(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp, env=env)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site.stdout.strip()) / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    installed = _call(*pip, "--python", python, "install", "--no-deps", wheel, cwd=tmp, env=env)
    assert installed.returncode == 0, installed.stderr
    return venv


@pytest.mark.slow  # builds the wheel and a virtualenv
def test_the_installed_wheel_gates_and_reports_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    kvgate = venv / "bin" / "kvgate"
    where = _call(
        venv / "bin" / "python", "-c", "import kvgate; print(kvgate.__file__)", cwd=tmp_path, env=env
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
    data = Path(where.stdout.strip()).parent / "data"
    for folder, packaged in SHIPPED.items():
        files = sorted(p.name for p in (REPO / folder).iterdir() if p.is_file())
        assert files and files == sorted(p.name for p in (data / packaged).iterdir()), folder

    suites = _call(kvgate, "suites", cwd=tmp_path, env=env)
    assert suites.returncode == 0, suites.stderr
    assert all(name in suites.stdout for name in ("smoke", "ruler", "reuse"))

    run = _call(kvgate, "run", "--engine", "fake", "-o", "runs", cwd=tmp_path, env=env)
    assert run.returncode == 3, run.stderr  # the default matrix on the smoke suite: inconclusive by design
    assert "gate: INCONCLUSIVE (exit 3)" in run.stdout
    (run_dir,) = (tmp_path / "runs").glob("*/manifest.json")
    for fmt in FORMATS:
        report = _call(kvgate, "report", run_dir.parent, "--format", fmt, cwd=tmp_path, env=env)
        assert report.returncode == 3 and report.stdout and not report.stderr, (fmt, report.stderr)
    html = _call(kvgate, "report", run_dir.parent, "--format", "html", cwd=tmp_path, env=env).stdout
    assert html.lstrip().lower().startswith("<!doctype html") and "fp8-e4m3" in html
