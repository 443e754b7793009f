"""Builds llama.cpp's `llama-server` from the llama.cpp source that llama-cpp-python's source distribution
vendors (the version kvgate pins, its sdist checked by sha256), CPU only, and installs it beside this
Python (the virtualenv's bin), where the llama-server flavour finds it (docs/server-flavours.md).

    python -m kvgate.engines.server.llama_server_build VERSION SHA256 [--bin DIR] [--cache DIR] [--jobs N]

`make setup` runs it once per pinned version (`make llama-server`; its stamp in the venv). The sdist, its
source and the CMake build folder are kept in `--cache` (default $LLAMA_SERVER_CACHE, else
.cache/llama-server), one folder per version, so a second run only re-links. Only the llama-server target
is built: CMake Release, static, ggml's CPU backend, no tests or examples, no curl or OpenSSL, no web UI
assets; `--jobs` compilers (default $LLAMA_SERVER_JOBS, else 2), under nice. Bad input and a failed step
print one line and exit 2; the wall and CPU seconds are printed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import NoReturn

from kvgate.engines.server.flavours.llama_server import EXECUTABLE
from kvgate.errors import EXIT_BAD_INPUT, BadInput

PACKAGE = "llama-cpp-python"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",  # the web UI is neither built (npm) nor downloaded: the server embeds none
    "-DLLAMA_USE_PREBUILT_UI=OFF",
)
"""Only what llama-server needs."""
NICENESS = 10


def sdist(cache: Path, version: str, sha256: str) -> Path:
    """The sdist of `version` in `cache`, downloaded from the package registry by pip unless it is there
    (pip checks the hash it downloads; a kept one is checked here)."""
    path = cache / f"{PACKAGE.replace('-', '_')}-{version}.tar.gz"
    if not path.is_file():
        requirements = cache / "requirements.txt"
        requirements.write_text(f"{PACKAGE}=={version} --hash=sha256:{sha256}\n")
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        done = subprocess.run(
            [*pip, "--require-hashes", "-r", str(requirements), "-d", str(cache)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not path.is_file():
            said = [line.strip() for line in done.stderr.splitlines() if line.strip()] or ["no sdist written"]
            raise BadInput(f"pip could not download {PACKAGE}=={version}'s sdist by its sha256: {said[-1]}")
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    if found != sha256:
        raise BadInput(f"{path} has sha256 {found}, not {sha256}: delete it, or give the sdist's own sha256")
    return path


def source(cache: Path, archive: Path) -> Path:
    """The llama.cpp source the sdist vendors, unpacked into `cache` once."""
    folder = cache / archive.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
    if not (folder / "tools" / "server" / "CMakeLists.txt").is_file():
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    if not (folder / "tools" / "server" / "CMakeLists.txt").is_file():
        raise BadInput(f"{archive.name} vendors no llama.cpp server (vendor/llama.cpp/tools/server)")
    return folder


def cmake() -> str:
    """The system's cmake, else the one on the package registry, installed beside this Python."""
    found = shutil.which("cmake")
    if found is not None:
        return found
    if subprocess.run([sys.executable, "-m", "pip", "install", "-q", "cmake"]).returncode != 0:
        raise BadInput("no cmake on PATH and pip could not install it: install cmake")
    return str(Path(sys.executable).parent / "cmake")


def step(what: str, argv: list[str], log: Path) -> None:
    """Run one build step under nice, its output kept in `log`; a failure is one line naming the log."""
    with log.open("w") as out:
        done = subprocess.run(
            argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=lambda: os.nice(NICENESS)
        )
    code = done.returncode
    if code != 0:
        raise BadInput(f"the {EXECUTABLE} {what} failed (exit {code}): its output is in {log}")


def build(version: str, sha256: str, bin_dir: Path, cache_root: Path, jobs: int) -> Path:
    """Build and install llama-server for `version`; its path in `bin_dir`."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)+", version):
        raise BadInput(f"version {version!r} is not a release number such as 0.3.36")
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise BadInput(f"sha256 {sha256!r} is not 64 lowercase hex digits (the sdist's, from the registry)")
    if jobs < 1:
        raise BadInput(f"--jobs must be ≥ 1, got {jobs}")
    cache = cache_root / version
    cache.mkdir(parents=True, exist_ok=True)
    cache = cache.resolve()  # the physical path: CMake keys its build folder by it
    src = source(cache, sdist(cache, version, sha256))
    tool, folder = cmake(), cache / "build"
    step("configure", [tool, "-S", str(src), "-B", str(folder), *CMAKE_OPTIONS], cache / "configure.log")
    step(
        "build", [tool, "--build", str(folder), "--target", EXECUTABLE, "-j", str(jobs)], cache / "build.log"
    )
    bin_dir.mkdir(parents=True, exist_ok=True)
    installed, fresh = bin_dir / EXECUTABLE, bin_dir / f".{EXECUTABLE}.new"
    shutil.copyfile(folder / "bin" / EXECUTABLE, fresh)
    fresh.chmod(0o755)
    os.replace(fresh, installed)  # a running llama-server keeps its old file
    return installed


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (--help shows the usage)\n")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="llama_server_build", description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help=f"the pinned {PACKAGE} version")
    parser.add_argument("sha256", help="its sdist's sha256, as the package registry lists it")
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent, help="where to install")
    default_cache = Path(os.environ.get("LLAMA_SERVER_CACHE", ".cache/llama-server"))
    parser.add_argument("--cache", type=Path, default=default_cache, help="the sdist and build folders")
    parser.add_argument(
        "--jobs", type=int, default=os.environ.get("LLAMA_SERVER_JOBS", "2"), help="compilers at once"
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        installed = build(args.version, args.sha256, args.bin, args.cache, args.jobs)
    except (BadInput, OSError, tarfile.TarError) as exc:
        print(f"{parser.prog}: error: {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_BAD_INPUT
    said = subprocess.run([str(installed), "--version"], capture_output=True, text=True)
    print(next((line for line in (said.stdout + said.stderr).splitlines() if line.startswith("version")), ""))
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"{EXECUTABLE} installed in {args.bin} after {time.monotonic() - start:.0f} s wall; the build's CPU "
        f"time {used.ru_utime + used.ru_stime:.0f} s ({used.ru_utime:.0f} user, {used.ru_stime:.0f} system)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
