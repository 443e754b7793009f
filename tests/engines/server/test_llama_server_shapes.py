"""The llama-server flavour's readings of what the real server printed and answered (recorded from the
llama-server `make setup` builds, version 0.5.0-dev build 1 commit 0c1e570, on the embedded model's GGUF):
its KV cache line, its /metrics text, its /completion answer; and where it finds the executable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvgate.engines.server.flavours.llama_server import EXECUTABLE, LlamaServer, executable
from kvgate.engines.server.response import MalformedResponse

SERVER = LlamaServer("llama-server")
Q8_LOG = """\
0.00.348.950 I llama_context: flash_attn            = enabled
0.00.349.017 I llama_kv_cache:        CPU KV buffer size =    11.95 MiB
0.00.355.347 I llama_kv_cache: size =   11.95 MiB (  1024 cells,  30 layers,  1/1 seqs), K (q8_0):    5.98 MiB, V (q8_0):    5.98 MiB
0.00.355.364 I llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 64
"""  # noqa: E501
METRICS = """\
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_total 20
llamacpp:prompt_tokens_cached_total 107
llamacpp:prompt_seconds_total 0.754608
"""
ANSWER = {  # /completion with return_tokens and n_probs 1, a 10-token prompt (generation_settings cut)
    "index": 0, "content": "_tutorial\n", "tokens": [79, 100, 43405, 198], "id_slot": 0, "stop": True,
    "tokens_predicted": 4, "tokens_evaluated": 10, "has_new_line": True, "truncated": False,
    "stop_type": "limit", "stopping_word": "", "tokens_cached": 13,
    "timings": {"cache_n": 0, "prompt_n": 10, "prompt_ms": 370.9, "predicted_n": 4, "predicted_ms": 68.0},
    "completion_probabilities": [
        {"id": t, "token": "x", "bytes": [120], "logprob": -1.5, "top_logprobs": [{"id": t, "logprob": -1.5}]}
        for t in (79, 100, 43405, 198)
    ],
}  # fmt: skip


def test_the_kv_cache_the_log_names() -> None:
    facts = SERVER.kv_cache_in_log(Q8_LOG)
    assert facts is not None and facts.dtype == "q8_0"
    assert facts.bytes_per_token == pytest.approx((5.98 + 5.98) * (1 << 20) / 1024)
    mixed = Q8_LOG.replace("V (q8_0)", "V (q4_0)")
    assert (facts := SERVER.kv_cache_in_log(mixed)) is not None and facts.dtype == "q8_0+q4_0"
    assert SERVER.kv_cache_in_log("0.00.4 I srv  llama_server: model loaded\n") is None
    two = Q8_LOG + Q8_LOG.replace("(q8_0)", "(f16)")  # two caches of different types: no one answer
    assert SERVER.kv_cache_in_log(two) is None


def test_the_cached_total_on_metrics() -> None:
    assert SERVER.cached_total(METRICS) == 107
    assert SERVER.cached_total("llamacpp:prompt_tokens_total 20\n") is None


def test_the_real_answer_is_read_with_cache_n_as_the_hits() -> None:
    """`tokens_cached` (13: the slot's prompt and output) is not the hits; `timings.cache_n` (0) is."""
    completion = SERVER.parse(ANSWER, 10)
    assert completion.cached_tokens == 0 and completion.token_ids == (79, 100, 43405, 198)
    assert completion.finish_reason == "length" and completion.logprobs == (-1.5,) * 4
    with pytest.raises(MalformedResponse, match="timings"):
        SERVER.parse({k: v for k, v in ANSWER.items() if k != "timings"}, 10)
    with pytest.raises(MalformedResponse, match=r"timings\.cache_n"):
        SERVER.parse({**ANSWER, "timings": {"cache_n": 11}}, 10)


def test_the_executable_beside_the_python_comes_first(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    assert executable(str(python)) == EXECUTABLE  # none beside it: PATH's
    (python.parent / EXECUTABLE).write_text("")
    os.chmod(python.parent / EXECUTABLE, 0o755)
    assert executable(str(python)) == str(python.parent / EXECUTABLE)
    assert SERVER.command("m.gguf", "127.0.0.1", 8080, str(python))[0] == str(python.parent / EXECUTABLE)
