"""The environment kvgate gives vLLM, set before vLLM is first imported (a value already set wins).

- VLLM_ENABLE_V1_MULTIPROCESSING: "0" without a GPU, "1" with one. On CPU the engine core and its worker
  then run in kvgate's own process: an arm's LLM starts in about 10 s instead of 40–100 s (two spawned
  processes, each importing vLLM and torch, on a 2-core machine), and shutting it down and collecting it
  frees its weights and KV (measured: RSS back from 2.9 GiB to 1.4 GiB after each arm). The worker
  replaces `torch.set_num_threads` with a stub; the session puts the original back. On GPU each LLM's
  engine core is a process of its own, so ending it returns all of its device memory before the next arm.
- VLLM_CPU_OMP_THREADS_BIND=auto: vLLM's default, stated; it applies when a CPU worker runs in a process
  of its own (multiprocessing set to "1"). Measured so on 2 cores: "nobind" decoded about 7× slower than
  "auto", its OpenMP threads contending with the scheduler process.
- VLLM_LOGGING_STREAM=ext://sys.stderr, VLLM_LOGGING_LEVEL=WARNING: vLLM logs to stdout by default,
  which would corrupt `kvgate run --json`.
- VLLM_NO_USAGE_STATS=1, DO_NOT_TRACK=1: no usage report is sent from a gate run.

The CPU KV budget is set through the `kv_cache_memory_bytes` engine argument (VLLM_CPU_KVCACHE_SPACE, in
GiB, overrides it when set).
"""

from __future__ import annotations

import os

VLLM_ENVIRONMENT = {
    "VLLM_CPU_OMP_THREADS_BIND": "auto",
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"


def prepare_vllm_environment(has_gpu: bool) -> dict[str, str]:
    """Set each variable not already set; returns the values in effect."""
    wanted = {**VLLM_ENVIRONMENT, MULTIPROCESSING: "1" if has_gpu else "0"}
    for key, value in wanted.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in wanted}
