"""The `llamacpp` engine: llama.cpp in-process through llama-cpp-python, on a GGUF model.

`engine.py` holds the engine and its sessions; `context.py` one llama.cpp context (decode, memory, state);
`kv_types.py` the KV cache types; `context_shift.py` eviction as llama.cpp's context shift; `prefix_store.py`
prefix reuse from saved sequence states; `state_offload.py` the state's round trip through a slower tier;
`counters.py` the checks of llama.cpp's own counters against what each arm is.
"""
