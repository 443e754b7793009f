"""KV cache facts from vLLM's cache config or its `vllm:cache_config_info` labels (engines.kv_cache_facts)."""

from __future__ import annotations

from kvgate.engines.kv_cache_facts import cache_facts, metrics_cache_config

METRICS = (
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="128",cache_dtype="fp8_e4m3",engine="0",'
    'kv_cache_memory_bytes="1073741824",num_gpu_blocks="728",prefix_caching_hash_algo="sha256"} 1.0\n'
    "vllm:num_preemptions_total 0.0\n"
)


def test_labels_give_the_dtype_and_the_bytes_a_token_takes() -> None:
    labels = metrics_cache_config(METRICS)
    assert labels is not None and labels["cache_dtype"] == "fp8_e4m3" and labels["num_gpu_blocks"] == "728"
    facts = cache_facts(labels, "float32")
    assert facts.dtype == "fp8_e4m3"
    assert facts.bytes_per_token == (1 << 30) / (728 * 128)
    assert facts.evidence(10) == {"kv_dtype": "fp8_e4m3", "kv_bytes": round(10 * (1 << 30) / (728 * 128))}


def test_auto_is_the_models_dtype_and_an_unknown_budget_no_bytes() -> None:
    facts = cache_facts(
        {"cache_dtype": "auto", "kv_cache_memory_bytes": None, "num_gpu_blocks": 9}, "torch.bfloat16"
    )
    assert (facts.dtype, facts.bytes_per_token) == ("bfloat16", None)
    assert metrics_cache_config("vllm:num_preemptions_total 3\n") is None
