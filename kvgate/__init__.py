"""kvgate: decide whether a KV-cache optimisation may roll out, by paired comparison with the full cache.

Importing kvgate sets OpenMP's wait policy to passive (`OMP_WAIT_POLICY=PASSIVE`, unless the environment
already names one) before anything loads torch's OpenMP runtime, whichever path loads it first (the hf
engine, the embedded model's conversion, a Ray worker): torch's threads then sleep between parallel
regions instead of spinning (libgomp's default spins 300,000 times first). The thread count and every
result stay as they were; on a shared machine spinning threads burn CPU waiting for each other (a
507-token smoke case on 2 threads at load ≈12: 11 CPU-s spinning, 2.1 passive; bench/first_generation.py;
a first `kvgate run`, which converts the model before the engine loads, spent 77% of its CPU in libgomp's
spin loop at load ≈10 before this moved here from the hf engine's package). It has no effect where torch
was imported before kvgate.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
