"""A GGUF model converted once into a safetensors folder under kvgate's cache, and its record.

transformers reads a GGUF by de-quantising every tensor (≈12 CPU-s for the embedded model), so kvgate
does it once and keeps the float32 result: `model.safetensors`, the config, generation config and
tokenizer, and `kvgate-model.json`, the record. The weights hold each shared tensor once, under its
first name in the state dict: a head tied to the embeddings is left out, as in transformers' own
checkpoints, and loading ties it back. (Converter 1 kept `lm_head.weight` alone; loading then found no
`model.embed_tokens.weight`, drew 28 M random numbers for it and replaced them by the tie: ≈0.2 CPU-s
and 113 MB of pages at every start-up.)

The record names the converter's version, the GGUF (file name, sha256, size, mtime) and the weights
file (sha256, size, mtime). A folder is used only while its record holds: this converter's version, and
each file's size and mtime as recorded, or, where they changed, its sha256 as recorded (then the record
takes the new size and mtime). Anything else (an older converter, another GGUF, weights rewritten or
damaged in a way that changed their stat) converts the model again. Hashing only a file whose stat
changed keeps the check to two `stat` calls per start-up (hashing the 538 MB of weights would cost
≈0.4 CPU-s).

Each conversion is a folder of its own beside the target (`.<name>.<random>`), never changed once
written; the target is a symbolic link to the current one, replaced in one atomic rename
(`new_version`). A reader resolves the link once and reads every file from the folder it names, which
it pins with a shared advisory lock held for the rest of its process (`_pinned`): a conversion that
replaces it removes only the superseded folders no process pins, so a reader that started on the older
conversion reads it whole, and one that resolved a folder being removed resolves the link again. (A
target that is a folder itself, as converters up to 2 wrote it, is read the same way and moved aside
when replaced.)

Converting holds an exclusive advisory lock on a file beside the folder (`conversion_lock`), and the
record is read again once it is held: processes starting together on a fresh cache (two test workers,
two runs) convert once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput

CONVERTER_VERSION = 2
RECORD = "kvgate-model.json"
WEIGHTS = "model.safetensors"
RESOLVE_ATTEMPTS = 8
"""How often a reader resolves the link again when the folder it named was removed before it was
pinned (each time means another conversion replaced it meanwhile)."""

_PINS: dict[Path, int] = {}
"""Each conversion folder this process reads → the descriptor holding its shared lock."""
_PINS_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def current_record(folder: Path, gguf: Path) -> dict[str, Any] | None:
    """`folder`'s record if the folder is this converter's conversion of `gguf` with its weights as
    written, else None (no record, another converter or GGUF, weights changed)."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("converter") != CONVERTER_VERSION:
        return None
    refreshed = dict(record)
    for prefix, path in (("source", gguf), ("weights", folder / WEIGHTS)):
        try:
            stat = path.stat()
        except OSError:
            return None
        if (stat.st_size, stat.st_mtime_ns) == (
            record.get(f"{prefix}_size"),
            record.get(f"{prefix}_mtime_ns"),
        ):
            continue
        if file_sha256(path) != record.get(f"{prefix}_sha256"):
            return None
        refreshed |= {f"{prefix}_size": stat.st_size, f"{prefix}_mtime_ns": stat.st_mtime_ns}
    if refreshed != record:  # same bytes, new stat (a copy, a reinstall): hash them once only
        _write_record(folder, refreshed)
    return refreshed


def ensure_converted(name: str, gguf: Path, target: Path) -> Path:
    """The folder holding this converter's conversion of `gguf` (the model `name`) that `target` names,
    pinned for this process (`_pinned`); converted first unless it already is, one process converting
    while the others wait for it (conversion_lock)."""
    folder = _pinned(target, gguf)
    if folder is not None:
        return folder
    with conversion_lock(target):
        folder = _pinned(target, gguf)
        if folder is None:  # not converted by whoever held the lock before
            convert(name, gguf, target)
            folder = _pinned(target, gguf)
    if folder is None:
        raise BadInput(f"the conversion of {gguf.name} in {target} was replaced while read; run again")
    return folder


def _pinned(target: Path, gguf: Path) -> Path | None:
    """The conversion folder `target` resolves to, pinned with a shared lock on it for the rest of this
    process, if it is current (`current_record`); None when there is none. A folder removed between
    resolving and pinning it (a conversion replaced it) is resolved again."""
    for _ in range(RESOLVE_ATTEMPTS):
        try:
            folder = target.resolve(strict=True)
        except (OSError, RuntimeError):  # RuntimeError: a loop of links
            return None
        if not _pin(folder):
            continue
        if current_record(folder, gguf) is None:
            _unpin(folder)
            return None
        return folder
    return None


def _pin(folder: Path) -> bool:
    """Hold a shared lock on `folder` (kept open: the kernel drops it when the process ends); False if
    the folder was removed (or is being removed) rather than pinned."""
    with _PINS_LOCK:
        if folder in _PINS:
            return True
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a conversion removes it
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(folder)) and (folder / RECORD).exists()
        except OSError:
            same = False
        if not same:
            os.close(fd)
            return False
        _PINS[folder] = fd
        return True


def _unpin(folder: Path) -> None:
    with _PINS_LOCK:
        fd = _PINS.pop(folder, None)
        if fd is not None:
            os.close(fd)


@contextmanager
def conversion_lock(target: Path) -> Iterator[None]:
    """Hold the exclusive lock on `.<target name>.lock` beside `target` for the block, waiting (with a
    line on stderr) while another process holds it; the kernel drops it if its holder dies."""
    path = target.parent / f".{target.name}.lock"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise BadInput(
            f"cannot open {path} to convert the model: {exc.strerror or exc}; "
            "set KVGATE_CACHE to a writable folder"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"kvgate: waiting for another process converting the model into {target}", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def convert(name: str, gguf: Path, target: Path) -> None:
    """De-quantise `gguf` to float32 and write it, its tokenizer and its record as `target`'s new version."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with new_version(target) as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        weights = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype="float32")
        _save_dequantized(weights, tmp)
        tokenizer.save_pretrained(tmp)
        _write_record(tmp, record_of(name, gguf, tmp / WEIGHTS))


@contextmanager
def new_version(target: Path) -> Iterator[Path]:
    """A new folder beside `target` to fill; when the block ends without error, `target` becomes a link
    to it (one rename over the old link, so a reader resolving it finds the old folder or the new one)
    and the superseded folders no process pins are removed; on an error the new folder is removed.
    Called under `conversion_lock`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield folder
        link = target.parent / f".{target.name}.link-{os.getpid()}-{threading.get_ident()}"
        link.unlink(missing_ok=True)
        link.symlink_to(folder.name)  # relative: the cache folder may be moved
        if target.is_dir() and not target.is_symlink():  # a folder written by converter 2 or earlier
            target.rename(target.parent / f".{target.name}.{os.urandom(6).hex()}")
        os.replace(link, target)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _remove_superseded(target, folder)


def _remove_superseded(target: Path, current: Path) -> None:
    """Remove the folders beside `target` that hold its earlier versions (or an interrupted conversion),
    each only once no process pins it: it is locked exclusively, without waiting, before removal."""
    prefix = f".{target.name}."
    for path in target.parent.iterdir():
        if not path.name.startswith(prefix) or path == current or path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a reader pins it: left for a later conversion to remove
            os.close(fd)
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)


def record_of(name: str, gguf: Path, weights: Path) -> dict[str, Any]:
    """The record of a conversion of `gguf` (the model `name`) whose weights file is `weights`."""
    record: dict[str, Any] = {"name": name, "source": gguf.name, "converter": CONVERTER_VERSION}
    for prefix, path in (("source", gguf), ("weights", weights)):
        stat = path.stat()
        record |= {
            f"{prefix}_sha256": file_sha256(path),
            f"{prefix}_size": stat.st_size,
            f"{prefix}_mtime_ns": stat.st_mtime_ns,
        }
    return record


def _write_record(folder: Path, record: dict[str, Any]) -> None:
    """Write the record whole or not at all (a temp file renamed over it)."""
    tmp = folder / f".{RECORD}.{os.getpid()}-{threading.get_ident()}"
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(folder / RECORD)


def untied_state(model: Any) -> dict[str, Any]:
    """The model's state dict with each shared tensor once, under its first name (the embeddings, not a
    head tied to them), contiguous as safetensors stores them."""
    state: dict[str, Any] = {}
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in seen or tensor.numel() == 0:
            seen.add(key)
            state[name] = tensor.detach().contiguous()
    return state


def _save_dequantized(weights: Any, folder: Path) -> None:
    """Write the de-quantised float32 weights as a plain safetensors model (no quantisation config)."""
    from safetensors.torch import save_file

    config = weights.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    weights.generation_config.save_pretrained(folder)
    save_file(untied_state(weights), str(folder / WEIGHTS), metadata={"format": "pt"})
