"""The hardware a run's rows were generated on, recorded per arm in its manifest, and the pairing rule.

A hardware kind is the accelerator's type and the engine's build (a hash of its fingerprint: library
versions, device, settings). Numerics differ across kinds, so a candidate's rows are paired with the
control's only when both ran on the same kind: every arm of a run must have run on one kind, or the run
is refused (at write, at resume and when reported). Each arm lists the kinds its work units ran on,
with the units and the nodes (at most MAX_NODES named) of each.
"""

from __future__ import annotations

import hashlib
import json
import platform
import socket
import sys
from typing import Any

from kvgate.errors import BadInput

MAX_NODES = 64


def accelerator_type() -> str:
    """The accelerator this process computes on: the CUDA device's name when torch (already imported by
    the engine) sees one, else the CPU architecture."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:  # a broken CUDA set-up computes on the CPU
        pass
    return f"cpu {platform.machine()}"


def engine_build(fingerprint: dict[str, Any]) -> str:
    """The first 16 hex digits of the sha256 of the engine fingerprint's canonical JSON."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def this_machine(fingerprint: dict[str, Any]) -> dict[str, str]:
    """This process's hardware kind and node name."""
    return {
        "accelerator": accelerator_type(),
        "engine_build": engine_build(fingerprint),
        "node": socket.gethostname(),
    }


def kind_of(entry: dict[str, Any]) -> tuple[str, str]:
    return entry["accelerator"], entry["engine_build"]


def describe_kind(kind: tuple[str, str]) -> str:
    return f"{kind[0]} (engine build {kind[1]})"


def record_unit(manifest: dict[str, Any], arm: str, machine: dict[str, str], units: int = 1) -> bool:
    """Count `units` of `arm` as run on `machine` in the manifest; True when its kinds or nodes changed
    (the manifest should then be written before the rows are stored)."""
    entries = manifest.setdefault("hardware", {}).setdefault(arm, [])
    kind = kind_of(machine)
    entry = next((e for e in entries if kind_of(e) == kind), None)
    changed = entry is None
    if entry is None:
        entry = {"accelerator": kind[0], "engine_build": kind[1], "units": 0, "nodes": []}
        entries.append(entry)
    entry["units"] += units
    if machine["node"] not in entry["nodes"] and len(entry["nodes"]) < MAX_NODES:
        entry["nodes"].append(machine["node"])
        changed = True
    return changed


def run_kinds(manifest: dict[str, Any]) -> set[tuple[str, str]]:
    """Every hardware kind any arm of the run ran on."""
    return {kind_of(e) for entries in (manifest.get("hardware") or {}).values() for e in entries}


def check_pairing(manifest: dict[str, Any], where: str) -> None:
    """Refuse (one line) a run whose arms ran on more than one hardware kind: its candidates' rows
    cannot be paired with the control's."""
    hardware = manifest.get("hardware") or {}
    if len(run_kinds(manifest)) <= 1:
        return
    control = manifest["matrix"]["control"]
    mine = {kind_of(e) for e in hardware.get(control, [])}
    for arm, entries in sorted(hardware.items()):
        theirs = {kind_of(e) for e in entries}
        if theirs != mine or len(theirs) > 1:
            raise BadInput(
                f"{where}: arm {arm!r} ran on {_shown(theirs)} but the control {control!r} on "
                f"{_shown(mine)}: rows from different hardware are not paired (numerics differ); "
                "run every arm on one kind"
            )


def _shown(kinds: set[tuple[str, str]]) -> str:
    return " + ".join(sorted(map(describe_kind, kinds))) or "nothing"
