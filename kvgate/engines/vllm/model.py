"""A model folder vLLM loads as transformers does: tied word embeddings stored under the input name.

A checkpoint whose config ties the word embeddings may hold the shared matrix under either name.
transformers accepts `lm_head.weight` alone; vLLM's Llama loader ties `lm_head` to
`model.embed_tokens.weight`, and when only `lm_head.weight` is present it keeps that as an untied head
and leaves the input embeddings uninitialised, so every logit comes out equal (each token at
log(1/vocab)). Such a checkpoint gets a derived folder with the tensor renamed: the same bytes, one key
changed in the safetensors header, the other files linked. A folder that needs no change is used as is,
as the embedded model's conversion is since converter 2 stores the embeddings' name (converted_model;
converter 1 kept the head's, and vLLM loaded a 538 MB renamed copy).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path
from typing import Any

from kvgate.paths import cache_dir, replaced_folder

HEAD = "lm_head.weight"
EMBEDDINGS = "model.embed_tokens.weight"
INDEX = "model.safetensors.index.json"


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's JSON header and the offset where its tensor data begins."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header: dict[str, Any] = json.loads(f.read(size))
    return header, 8 + size


def needs_renamed_embeddings(folder: Path) -> Path | None:
    """The safetensors file to fix when `folder` ties its embeddings but stores only the head, else None."""
    config = json.loads((folder / "config.json").read_text())
    if not config.get("tie_word_embeddings", False):
        return None
    files = sorted(folder.glob("*.safetensors"))
    names = {name: path for path in files for name in read_header(path)[0]}
    if EMBEDDINGS in names or HEAD not in names:
        return None
    return names[HEAD]


def vllm_model_folder(folder: Path) -> Path:
    """`folder`, or (once, cached) a copy in which the tied embeddings carry the name vLLM loads."""
    weights = needs_renamed_embeddings(folder)
    if weights is None:
        return folder
    stat = weights.stat()
    key = hashlib.sha256(f"{folder.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = cache_dir() / "vllm-models" / f"{folder.name}-{key}"
    if (target / weights.name).exists():
        return target
    with replaced_folder(target) as tmp:
        for item in folder.iterdir():
            if item.name == INDEX:
                index = json.loads(item.read_text())
                index["weight_map"][EMBEDDINGS] = index["weight_map"].pop(HEAD)
                (tmp / INDEX).write_text(json.dumps(index, indent=2))
            elif item != weights:
                (tmp / item.name).symlink_to(item.resolve())
        _copy_renamed(weights, tmp / weights.name)
    return target


def _copy_renamed(source: Path, dest: Path) -> None:
    """Copy `source` with its HEAD tensor renamed EMBEDDINGS (header rewritten, data bytes unchanged)."""
    header, data_start = read_header(source)
    header[EMBEDDINGS] = header.pop(HEAD)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data section stays 8-byte aligned
    with source.open("rb") as src, dest.open("wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        src.seek(data_start)
        shutil.copyfileobj(src, out, 1 << 24)
