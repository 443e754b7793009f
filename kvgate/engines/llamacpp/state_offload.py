"""Offload in llama.cpp: the sequence's KV state leaves the context and comes back, checksummed.

After prefill the sequence's state, in llama.cpp's own format, is written to the slower tier: host memory
(`llama_state_seq_get_data`) or a session file on disk (`llama_state_seq_save_file`). The sequence is then
removed from the context (its memory must read empty) and loaded back from the tier alone. The state
read back must hash (SHA-256) to what was sent and hold as many positions, or `OffloadCorrupted` fails
the case: corrupted KV is never decoded from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from kvgate.engines.llamacpp.context import Context


class OffloadCorrupted(RuntimeError):
    """The KV state came back different from what was sent."""


def round_trip(
    ctx: Context, tier: str, directory: Path | None, tokens: Sequence[int], plant_corruption: bool = False
) -> int:
    """Move `ctx`'s sequence (holding `tokens`) to `tier` ("host" or "disk", in `directory`) and back;
    the bytes moved. `plant_corruption` flips one bit of the stored copy, to prove the checksum catches it."""
    sent = ctx.state()
    digest, n = hashlib.sha256(sent).hexdigest(), ctx.cached()
    stored: bytearray | None = None
    path = (directory or Path(".")) / "sequence.state"
    if tier == "host":
        stored = bytearray(sent)
    else:
        ctx.save_file(path, tokens)
    del sent
    if plant_corruption:
        _flip_last_bit(stored, path)
    ctx.remove(0)
    if ctx.cached() != 0:
        raise OffloadCorrupted(f"the context still held {ctx.cached()} positions after the offload")
    try:
        if stored is not None:
            ctx.load_state(bytes(stored))
        else:
            ctx.load_file(path, len(tokens))
    except (RuntimeError, OSError) as exc:
        raise OffloadCorrupted(f"offload to the {tier} tier: llama.cpp could not load it: {exc}") from exc
    finally:
        path.unlink(missing_ok=True)
    back = ctx.state()
    if hashlib.sha256(back).hexdigest() != digest or ctx.cached() != n:
        raise OffloadCorrupted(
            f"offload to the {tier} tier: the KV state came back different (checksum mismatch)"
        )
    return len(back)


def _flip_last_bit(stored: bytearray | None, path: Path) -> None:
    """Flip the lowest bit of the stored copy's last byte (the last layer's V data)."""
    if stored is not None:
        stored[-1] ^= 1
        return
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
