"""The KV formats the hf reference simulates, one module per family: quantise each cached entry as the
format defines, dequantise at once, and keep the dequantised values (the model reads them as it would
read the engine's dequantised cache). `formats` names what each dtype stores per value."""
