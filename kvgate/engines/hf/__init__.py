"""The transformers reference engine.

Importing this package sets OpenMP's wait policy to passive (`OMP_WAIT_POLICY=PASSIVE`, unless the
environment already names one) before torch loads its OpenMP runtime: torch's threads then sleep
between parallel regions instead of spinning. The thread count and every result stay as they were;
on a shared machine the spinning threads had burned CPU time waiting for each other (a 507-token
smoke case on 2 threads at load ≈12: 11 CPU-s spinning, 2.1 passive; bench/first_generation.py).
It has no effect where torch was imported before this package.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
