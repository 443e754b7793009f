"""kvgate: decide whether a KV-cache optimisation may roll out, by paired comparison with the full cache."""

__version__ = "0.1.0"
