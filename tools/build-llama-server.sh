#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the llama.cpp source that llama-cpp-python's source distribution
# vendors (the version kvgate pins, checked by its sha256), CPU only, and installs it into the virtualenv's
# bin, where the server engine's llama-server flavour finds it on PATH (docs/server-flavours.md).
#
#   tools/build-llama-server.sh VENV VERSION SHA256
#
# The sdist, its source and the cmake build folder are kept in $LLAMA_SERVER_CACHE (.cache/llama-server),
# so a second run only re-links. `make setup` runs it once per pinned version (its stamp in VENV).
# $LLAMA_SERVER_JOBS compilers run (2), under nice; the wall and CPU seconds are printed at the end.
set -euo pipefail
venv=${1:?usage: $0 VENV VERSION SHA256}
version=${2:?usage: $0 VENV VERSION SHA256}
sha256=${3:?usage: $0 VENV VERSION SHA256}
cache=${LLAMA_SERVER_CACHE:-.cache/llama-server}/$version
jobs=${LLAMA_SERVER_JOBS:-2}
python=$venv/bin/python
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)  # the physical path: cmake keys its build folder by it

sdist=$cache/llama_cpp_python-$version.tar.gz
if [ ! -f "$sdist" ]; then
  echo "llama-cpp-python==$version --hash=sha256:$sha256" >"$cache/requirements.txt"
  "$python" -m pip download -q --no-deps --no-binary :all: --require-hashes \
    -r "$cache/requirements.txt" -d "$cache"
fi
source_dir=$cache/llama_cpp_python-$version/vendor/llama.cpp
if [ ! -f "$source_dir/tools/server/CMakeLists.txt" ]; then
  tar -xzf "$sdist" -C "$cache"
fi

cmake=$(command -v cmake || true)
if [ -z "$cmake" ]; then  # no system cmake: the one on the package registry
  "$python" -m pip install -q cmake
  cmake=$venv/bin/cmake
fi

# Only what llama-server needs: no tests, examples or unified binary; no HTTPS (no OpenSSL, no curl);
# the web UI's assets are neither built (npm) nor downloaded, so the server embeds none.
nice -n 10 "$cmake" -S "$source_dir" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  >"$cache/configure.log"
nice -n 10 "$cmake" --build "$cache/build" --target llama-server -j "$jobs" >"$cache/build.log"
install -m 755 "$cache/build/bin/llama-server" "$venv/bin/llama-server"
"$venv/bin/llama-server" --version 2>&1 | grep -m1 '^version' || true
echo "llama-server installed in $venv/bin after ${SECONDS} s wall; CPU time (user system), this shell's" \
  "then the build's:"
times
