"""Generator parameters for tests with the real tokenizer: one haystack unit under 2% of the target."""

from __future__ import annotations

from typing import Any

# a kv pair is ~75 tokens
CASES: dict[str, dict[str, Any]] = {
    "needle": {"lengths": (1024, 2048), "depths": (0.3,), "variant": "multikey", "value_type": "uuid"},
    "variable_tracking": {"lengths": (1024, 2048)},
    "common_words": {"lengths": (1024, 2048)},
    "freq_words": {"lengths": (1024, 2048)},
    "kv_retrieval": {"lengths": (4096,), "depths": (0.5,)},
    "structured_output": {"lengths": (2048,), "depths": (0.5,)},  # a record is ~22 tokens
    "tool_call": {"lengths": (1024, 2048), "depths": (0.5,)},
    "code": {"lengths": (1024, 2048), "depths": (0.5,)},
    "block_edges": {"block_sizes": (16, 128), "multiples": (8,)},  # exact: the target ± 1 at most
}
