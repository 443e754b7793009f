"""The `server` engine: an OpenAI-compatible completions server, as deployed, gated like any engine.

Two forms. Launched (the default): every arm session starts its own server from a command template
(`launch.py`, `flags.py`) with the arm's flags, on a free loopback port, and stops it when the pass ends.
Given endpoints (`kvgate run --endpoint ARM=URL`): a stack someone else runs; kvgate cannot restart it
between arms, so isolation rests on the per-request cache salt and on the counters it reports.

Requests (`client.py`, `response.py`) carry the case's frozen prompt token ids, greedy sampling, the case's
max tokens, the arm's namespace as `cache_salt`, and ask for the output token ids and the cached prompt
tokens back; at most `concurrency` are in flight. Each pass leaves a record (`record.py`): attempts,
timeouts and the preemptions the server's Prometheus `/metrics` counted (`metrics.py`).
"""
