"""The serving stacks the server engine launches and reads besides vLLM: one module per flavour, each
with its launch command, its flags per arm, its refusals in its own words, and how its answers carry
the output token ids and cached-token counters (`base.Flavour`). `FLAVOURS` names them."""
