"""llama-server's slot save and restore as an offload tier on disk, proven by the server's own answers.

llama-server serves one slot here (`--parallel 1`), whose KV it writes to a file under `--slot-save-path`
and reads back when asked (tools/server/README.md):

- `POST /slots/0?action=save {"filename": F}` → `{id_slot, filename, n_saved, n_written, timings}`:
  the slot's cached tokens written, and the file's bytes;
- `POST /slots/0?action=erase` → `{id_slot, n_erased}`: the slot's KV dropped;
- `POST /slots/0?action=restore {"filename": F}` → `{id_slot, filename, n_restored, n_read, timings}`.

An arm that offloads behind prefix reuse runs per case: the warm-up prefills the prompt into the slot and
saves it to its own file; the slot is erased before the measured pass (the device reset of the served
protocol); each measured request follows the restore of its case's file, and is served from it
(`timings.cache_n`). The rows' `n_tier_written`, `n_tier_read` are ⌈n_saved / block⌉ and
⌈n_restored / block⌉ (the offload treatment's `block_size`): the server's counts, never kvgate's
assumption. The restored slot holds the case's own prompt, so its measured request must be served all
of it but the last token (llama-server recomputes that one): fewer cached tokens than
min(n_restored, prompt) − 1 mean the restore loaded nothing it answered for (`unserved`), and the arm
fails rather than pass on a claim.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from kvgate.engines.server import bounded_http
from kvgate.errors import EngineFailure

SLOT = 0
DEADLINE_S = 60.0
"""The most one save, erase or restore may take (a file of a long prompt's KV on a slow disk)."""


@dataclass(frozen=True)
class SavedSlot:
    filename: str
    tokens: int
    """`n_saved`: the cached tokens the server wrote."""


class SlotTier:
    """One launched llama-server's slot as an arm's offload tier: save per case, erase, restore per case."""

    def __init__(self, url: str, arm: str, block_size: int) -> None:
        self.url, self.arm, self.block_size = url, arm, block_size
        self.saved: dict[str, SavedSlot] = {}

    def save(self, case_id: str) -> None:
        """Write the slot's KV (the case's warmed-up prompt) to the case's own file."""
        filename = self.saved[case_id].filename if case_id in self.saved else f"case-{len(self.saved)}.bin"
        answer = self._post("save", {"filename": filename})
        self.saved[case_id] = SavedSlot(filename, _count(answer, "n_saved", self._where("save")))
        _count(answer, "n_written", self._where("save"))

    def erase(self) -> bool:
        """Drop the slot's KV; whether the server says it did."""
        answer = self._post("erase", None)
        _count(answer, "n_erased", self._where("erase"))
        return True

    def restore(self, case_id: str) -> int:
        """Load the case's file back into the slot; the tokens the server says it restored."""
        if case_id not in self.saved:
            raise EngineFailure(f"arm {self.arm!r}: case {case_id} was never saved to its slot file")
        answer = self._post("restore", {"filename": self.saved[case_id].filename})
        _count(answer, "n_read", self._where("restore"))
        return _count(answer, "n_restored", self._where("restore"))

    def unserved(self, case_id: str, restored: int, n_prompt: int, cached: int) -> str | None:
        """Why the measured request of `case_id` was not served from its restored slot, or None."""
        expected = min(restored, n_prompt) - 1
        if cached >= expected:
            return None
        return (
            f"arm {self.arm!r}: llama-server restored {restored} tokens of case {case_id}'s slot, but served "
            f"{cached} of its {n_prompt}-token prompt from the cache (at least {expected} expected): the "
            "restore did not load the KV it answered for"
        )

    def blocks(self, case_id: str, restored: int) -> tuple[int, int]:
        """(blocks written, blocks read) of the case: its saved and restored tokens in whole blocks."""
        saved = self.saved[case_id].tokens if case_id in self.saved else 0
        return -(-saved // self.block_size), -(-restored // self.block_size)

    def _where(self, action: str) -> str:
        return f"arm {self.arm!r}: llama-server's /slots/{SLOT}?action={action}"

    def _post(self, action: str, body: dict[str, Any] | None) -> Any:
        where = self._where(action)
        try:
            status, raw = bounded_http.request(
                "POST", f"{self.url}/slots/{SLOT}?action={action}", DEADLINE_S, json=body
            )
        except (httpx.HTTPError, TimeoutError) as exc:
            raise EngineFailure(f"{where} failed: {exc or f'no answer within {DEADLINE_S:g} s'}") from None
        if status != 200:
            text = raw[:200].decode("utf-8", "replace").strip()
            raise EngineFailure(f"{where} answered HTTP {status} (is --slot-save-path set?): {text}")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise EngineFailure(f"{where} answered something other than JSON") from None


def _count(answer: Any, key: str, where: str) -> int:
    value = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EngineFailure(f"{where} answered {key} = {value!r}, not a count")
    return value
