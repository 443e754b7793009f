"""The llama-server build (`python -m kvgate.engines.server.llama_server_build`, run by `make setup`) on
a planted sdist: a tarball laid out as llama-cpp-python's, whose vendored "llama.cpp" is one C file that
CMake builds into a `llama-server` printing a version line. Every step but pip's download runs for real
(the sdist's sha256 checked, unpacked once, CMake configure and build, installed); the Makefile's stamp
keeps a second `make setup` from running it. The real build: docs/server-flavours.md."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from kvgate.engines.server.llama_server_build import main

REPO = Path(__file__).resolve().parents[3]
VERSION = "9.9.9"
PLANTED = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(planted C)\n"
    "set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\n"
    'add_executable(llama-server server.c)\nmessage(STATUS "release ${CMAKE_BUILD_TYPE}")\n',
    "server.c": '#include <stdio.h>\nint main(void) { fputs("version: 1 (planted)\\n", stderr); }\n',
    "tools/server/CMakeLists.txt": "# the server's own folder, which the build looks for\n",
}
needs_a_compiler = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("cc") is None, reason="no cmake or C compiler here"
)


def planted_sdist(cache: Path, files: dict[str, str]) -> str:
    """llama-cpp-python's sdist of VERSION, holding `files` under vendor/llama.cpp, left in the build's
    cache folder (where a downloaded one is kept); its sha256."""
    folder = cache / VERSION
    folder.mkdir(parents=True)
    archive = folder / f"llama_cpp_python-{VERSION}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            member = tarfile.TarInfo(f"llama_cpp_python-{VERSION}/vendor/llama.cpp/{name}")
            member.size = len(text.encode())
            tar.addfile(member, io.BytesIO(text.encode()))
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def build(
    tmp_path: Path, sha256: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str], list[str]]:
    code = main([VERSION, sha256, "--bin", str(tmp_path / "bin"), "--cache", str(tmp_path / "cache")])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


@needs_a_compiler
def test_the_vendored_server_is_configured_built_and_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sha256 = planted_sdist(tmp_path / "cache", PLANTED)
    code, out, err = build(tmp_path, sha256, capsys)
    assert code == 0 and not err, err
    assert out[0] == "version: 1 (planted)" and out[1].startswith(f"llama-server installed in {tmp_path}/bin")
    installed = tmp_path / "bin" / "llama-server"
    assert installed.stat().st_mode & 0o777 == 0o755
    said = subprocess.run([installed], capture_output=True, text=True)
    assert said.stderr == "version: 1 (planted)\n"
    folder = tmp_path / "cache" / VERSION
    assert "release Release" in (folder / "configure.log").read_text()
    unpacked = folder / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp" / "server.c"
    unpacked.write_text(unpacked.read_text().replace("planted", "kept"))
    code, out, _ = build(tmp_path, sha256, capsys)  # a second run unpacks nothing again: only rebuilds
    assert code == 0 and out[0] == "version: 1 (kept)"


@needs_a_compiler
def test_a_failed_configure_is_one_line_naming_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = {
        **PLANTED,
        "CMakeLists.txt": 'cmake_minimum_required(VERSION 3.14)\nmessage(FATAL_ERROR "no")\n',
    }
    code, out, err = build(tmp_path, planted_sdist(tmp_path / "cache", broken), capsys)
    log = tmp_path.resolve() / "cache" / VERSION / "configure.log"
    assert code == 2 and not out
    assert err == [
        f"llama_server_build: error: the llama-server configure failed (exit 1): its output is in {log}"
    ]
    assert "no" in log.read_text() and not (tmp_path / "bin").exists()


def test_a_kept_sdist_of_another_sha256_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted_sdist(tmp_path / "cache", PLANTED)
    code, out, err = build(tmp_path, "0" * 64, capsys)
    assert code == 2 and not out and len(err) == 1
    assert (
        f"llama_cpp_python-{VERSION}.tar.gz has sha256 " in err[0] and f"not {'0' * 64}: delete it" in err[0]
    )


def test_an_sdist_that_vendors_no_server_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sha256 = planted_sdist(tmp_path / "cache", {"CMakeLists.txt": PLANTED["CMakeLists.txt"]})
    code, out, err = build(tmp_path, sha256, capsys)
    assert (code, out) == (2, [])
    said = f"llama_cpp_python-{VERSION}.tar.gz vendors no llama.cpp server (vendor/llama.cpp/tools/server)"
    assert err == [f"llama_server_build: error: {said}"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["0.3.x", "0" * 64], "version '0.3.x' is not a release number such as 0.3.36"),
        (["0.3.36", "ABC"], "sha256 'ABC' is not 64 lowercase hex digits"),
        (["0.3.36", "0" * 64, "--jobs", "0"], "--jobs must be ≥ 1, got 0"),
        (["0.3.36", "0" * 64, "--jobs", "x"], "argument --jobs: invalid int value: 'x'"),
        (["0.3.36"], "the following arguments are required: sha256"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    try:
        code = main([*argv, "--cache", str(tmp_path)])
    except SystemExit as exc:  # argparse's own refusals
        code = int(str(exc.code))
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith(f"llama_server_build: error: {said}") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_setup_builds_once_per_version(tmp_path: Path) -> None:
    """Without its stamp, `make setup` runs the build for the pinned version (and only it, the venv's stamp
    being newer); with a newer stamp, a second `make setup` runs nothing (`make -n`: what it would run)."""
    setup, stamp = tmp_path / "setup-done", tmp_path / "llama-server-done"
    later = time.time() + 3600  # newer than the build module, pyproject.toml and the Makefile
    setup.touch()
    os.utime(setup, (later, later))
    argv = [
        "make",
        "-n",
        "-s",
        "-C",
        str(REPO),
        "setup",
        f"STAMP={setup}",
        f"LLAMA_SERVER_STAMP={stamp}",
    ]
    would = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.splitlines()
    version = re.search(r'"llama-cpp-python==([0-9.]+)"', (REPO / "pyproject.toml").read_text())
    assert version is not None and would[0].startswith(
        ".venv/bin/python -m kvgate.engines.server.llama_server_build "
    )
    assert would[0].split()[3] == version.group(1) and re.fullmatch(r"[0-9a-f]{64}", would[0].split()[4])
    assert would[1:] == [f"touch {stamp}"]
    stamp.touch()
    os.utime(stamp, (later, later))
    assert subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout == ""
