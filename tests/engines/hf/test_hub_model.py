"""`--model org/name`: a Hugging Face hub id, resolved through the hub's cache, offline.

The cache is built here as the hub lays it out (`models--org--name/{blobs,refs,snapshots}`, blobs
named by their content's sha256, snapshot files linking to them), holding a tiny random Llama with the
embedded model's tokenizer; `kvgate` runs in a subprocess with `HF_HUB_CACHE` and `HF_HUB_OFFLINE=1`,
so the real `snapshot_download` path is taken and nothing can reach the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvgate.model_hub import is_hub_id, split_hub_id

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def tiny_model_files(folder: Path, model_folder: Path) -> None:
    """A 2-layer random Llama with the embedded model's vocabulary and tokenizer, saved in `folder`."""
    import torch
    import transformers

    torch.manual_seed(0)
    vocab = json.loads((model_folder / "config.json").read_text())["vocab_size"]
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=vocab,
        max_position_embeddings=2048,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (model_folder / name).exists():
            shutil.copy(model_folder / name, folder / name)


def hub_cache(root: Path, repo: str, files: Path) -> Path:
    """`files` laid out in a hub cache under `root` as revision `main` of `repo`; returns the snapshot."""
    repo_dir = root / f"models--{repo.replace('/', '--')}"
    blobs, snapshot = repo_dir / "blobs", repo_dir / "snapshots" / COMMIT
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copy(path, blobs / digest)
        (snapshot / path.name).symlink_to(Path("../../blobs") / digest)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    return snapshot


def kvgate(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", "from kvgate.cli import main; main()", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_hub_ids_are_told_from_paths_and_names() -> None:
    assert is_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert is_hub_id("org/model@v1.0") and split_hub_id("org/model@v1.0") == ("org/model", "v1.0")
    assert split_hub_id("org/model") == ("org/model", None)
    assert not is_hub_id("smollm2-135m") and not is_hub_id("a/b/c") and not is_hub_id("/abs/path")


def test_a_hub_model_runs_from_the_cache_offline(tmp_path: Path, model_folder: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    tiny_model_files(files, model_folder)
    cache = tmp_path / "hub"
    hub_cache(cache, "tiny-org/tiny-llama", files)
    matrix = tmp_path / "control.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n')

    run = kvgate(
        [
            "run",
            "--model",
            "tiny-org/tiny-llama",
            "-m",
            str(matrix),
            "--limit",
            "2",
            "--run-dir",
            "run",
            "--json",
        ],
        cache,
        tmp_path,
    )
    assert run.returncode in (0, 1, 3), run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert {a["arm"] for a in report["arms"]} == {"fp8-e4m3"}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["name"] == "tiny-org/tiny-llama"
    assert manifest["model"]["source"] == f"hf:tiny-org/tiny-llama@{COMMIT}"
    blob = hashlib.sha256((files / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["model"]["sha256"] == hashlib.sha256(f"model.safetensors:{blob}".encode()).hexdigest()

    missing = kvgate(["run", "--model", "tiny-org/not-cached", "--run-dir", "run2"], cache, tmp_path)
    assert missing.returncode == 2
    (line,) = missing.stderr.strip().splitlines()[-1:]
    assert "tiny-org/not-cached" in line and "Hugging Face cache" in line
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize("name", ["org/model@", "org//model"])
def test_malformed_hub_ids_are_not_hub_ids(name: str) -> None:
    assert not is_hub_id(name)
