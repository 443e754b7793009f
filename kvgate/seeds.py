"""The bounds of every seed kvgate takes: `freeze --seed`, `simulate --seed` and a matrix's `seed`.

A seed is a non-negative integer below 2³², which every random generator kvgate hands it to accepts
(numpy's, torch's, vLLM's); a negative one would mean "pick one at random" to some servers (llama-server
takes -1 so), and a run would no longer replay.
"""

MAX_SEED = 2**32 - 1
