"""Models named by Hugging Face id (`org/name`, or `org/name@revision`), through `huggingface_hub`.

The download goes through the hub's own cache (`HF_HUB_CACHE`, `HF_HUB_OFFLINE` and tokens apply as
for any hub client): a model already cached is used without the network. Only the files a causal LM
needs are fetched (config, weights in safetensors, tokenizer, generation config).

A snapshot's identity needs no hashing of weights: the hub stores each large file under the sha256 of
its content (`blobs/<sha256>`), and a snapshot folder holds links to those blobs, so the run manifest
records the commit and the blob names.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kvgate.errors import BadInput

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}(@[\w./-]{1,128})?$")
NEEDED_FILES = [
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "*.safetensors.index.json",
    "tokenizer*",
    "special_tokens_map.json",
    "vocab.*",
    "merges.txt",
    "*.jinja",
]


def is_hub_id(name: str) -> bool:
    """`name` has the form of a hub model id (`org/name`, optionally `@revision`)."""
    return HUB_ID.match(name) is not None


def split_hub_id(name: str) -> tuple[str, str | None]:
    """(`org/name`, revision or None)."""
    repo, _, revision = name.partition("@")
    return repo, revision or None


def hub_snapshot(name: str) -> Path:
    """The local snapshot folder of hub model `name`, downloaded into the hub's cache if missing.

    A model that is neither cached nor downloadable (offline, unknown id, no access) is a one-line
    BadInput naming it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    repo, revision = split_hub_id(name)
    try:
        folder = Path(snapshot_download(repo, revision=revision, allow_patterns=NEEDED_FILES))
    except LocalEntryNotFoundError:
        raise BadInput(
            f"model {name!r} is not in the Hugging Face cache and cannot be downloaded here (offline?); "
            "download it where there is network, or name a local folder"
        ) from None
    except RepositoryNotFoundError:
        raise BadInput(f"model {name!r}: no such model on the Hugging Face hub (or no access)") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise BadInput(
            f"model {name!r}: cannot fetch it from the Hugging Face hub: {_first_line(exc)}"
        ) from None
    if not (folder / "config.json").is_file():
        raise BadInput(f"model {name!r}: its snapshot {folder} has no config.json (not a transformers model)")
    return folder


def snapshot_identity(folder: Path) -> str | None:
    """A digest of the blobs a hub snapshot links to (their names are their content's sha256), or None
    when `folder` is not a hub snapshot of linked blobs."""
    names = []
    for path in sorted(folder.glob("*.safetensors")):
        target = path.resolve()
        if (
            not path.is_symlink()
            or target.parent.name != "blobs"
            or not re.fullmatch(r"[0-9a-f]{64}", target.name)
        ):
            return None
        names.append(f"{path.name}:{target.name}")
    return hashlib.sha256("\n".join(names).encode()).hexdigest() if names else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
