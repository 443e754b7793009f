"""Third-party progress bars off in a kvgate command's process.

The first `kvgate freeze --model smollm2-135m` (or `kvgate run` on it) converts the embedded GGUF model
into kvgate's cache, and transformers prints two progress bars while it does ("Converting and
de-quantizing GGUF tensors...", a bare tqdm, and "Loading weights", transformers' own); a hub model's
download prints huggingface_hub's. They are the libraries' noise, not kvgate's: kvgate's own lines
(what it wrote, the run's progress) are unaffected.

Both libraries read their switch from the environment when they are first imported (tqdm's
`TQDM_DISABLE`, huggingface_hub's `HF_HUB_DISABLE_PROGRESS_BARS`, which transformers follows), so it is
set before they load, for the process and the servers it launches; a value the user set is kept, and
`kvgate freeze --verbose` and `kvgate run --verbose` set nothing.
"""

from __future__ import annotations

import os
import sys

SWITCHES = {"TQDM_DISABLE": "tqdm", "HF_HUB_DISABLE_PROGRESS_BARS": "huggingface_hub"}
"""Each library's environment switch → the module that reads it on import."""


def hide_library_progress_bars() -> list[str]:
    """Set each switch the user left unset, while its library is not loaded yet (a loaded one has read
    its switch already); the names set."""
    chosen = [
        name for name, module in SWITCHES.items() if name not in os.environ and module not in sys.modules
    ]
    for name in chosen:
        os.environ[name] = "1"
    return chosen
