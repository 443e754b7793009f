"""The vLLM engine, in-process (`vllm.LLM`): `engine` (sessions, treatments as engine arguments),
`args` (a treatment's vLLM arguments), `counters` (prefix-cache counters checked per arm), `env` (vLLM's
environment set before it loads) and `model` (the embedded model's folder as vLLM loads it)."""
