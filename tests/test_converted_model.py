"""The record of a GGUF's conversion in kvgate's cache: a folder is used only while it is this
converter's conversion of this GGUF with its weights as written; a changed stat is checked by hash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvgate import converted_model
from kvgate.converted_model import CONVERTER_VERSION, RECORD, WEIGHTS, current_record, record_of


@pytest.fixture
def converted(tmp_path: Path) -> tuple[Path, Path]:
    """(a conversion folder with its record, the GGUF it records), stand-in bytes for both files."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    folder = tmp_path / "converted"
    folder.mkdir()
    (folder / WEIGHTS).write_bytes(b"weights" * 1000)
    (folder / RECORD).write_text(json.dumps(record_of("m", gguf, folder / WEIGHTS)))
    return folder, gguf


def test_a_folder_as_recorded_is_current(converted: tuple[Path, Path]) -> None:
    folder, gguf = converted
    record = current_record(folder, gguf)
    assert record is not None and record["converter"] == CONVERTER_VERSION
    assert record["source"] == "model.gguf" and record["source_sha256"] == converted_model.file_sha256(gguf)


def test_weights_with_other_bytes_are_refused(converted: tuple[Path, Path]) -> None:
    folder, gguf = converted
    weights = folder / WEIGHTS
    damaged = bytearray(weights.read_bytes())
    damaged[100] ^= 1
    stat = weights.stat()
    weights.write_bytes(bytes(damaged))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # same size, newer
    assert current_record(folder, gguf) is None


def test_another_gguf_is_refused(converted: tuple[Path, Path]) -> None:
    folder, gguf = converted
    gguf.write_bytes(gguf.read_bytes() + b"more")
    assert current_record(folder, gguf) is None


def test_an_older_converter_or_a_missing_record_is_refused(converted: tuple[Path, Path]) -> None:
    folder, gguf = converted
    record = json.loads((folder / RECORD).read_text())
    (folder / RECORD).write_text(json.dumps({**record, "converter": CONVERTER_VERSION - 1}))
    assert current_record(folder, gguf) is None
    (folder / RECORD).write_text("{not json")
    assert current_record(folder, gguf) is None
    (folder / RECORD).unlink()
    assert current_record(folder, gguf) is None
    assert current_record(folder / "absent", gguf) is None


def test_same_bytes_with_a_new_stat_are_hashed_once(
    converted: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, gguf = converted
    weights = folder / WEIGHTS
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched, not changed
    hashed: list[Path] = []
    real = converted_model.file_sha256
    monkeypatch.setattr(converted_model, "file_sha256", lambda path: hashed.append(path) or real(path))
    assert current_record(folder, gguf) is not None
    assert hashed == [weights]
    assert json.loads((folder / RECORD).read_text())["weights_mtime_ns"] == stat.st_mtime_ns + 10**9
    assert current_record(folder, gguf) is not None
    assert hashed == [weights]  # the refreshed record needs no second hash


def test_a_tied_head_is_stored_once_under_the_embeddings_name() -> None:
    import torch
    from torch import nn

    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(5, 3)
            self.norm = nn.LayerNorm(3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.embed.weight
            self.register_buffer("empty_a", torch.zeros(0))
            self.register_buffer("empty_b", torch.zeros(0))

    state = converted_model.untied_state(Tied())
    assert list(state) == ["empty_a", "empty_b", "embed.weight", "norm.weight", "norm.bias"]


def test_the_embedded_model_loads_without_drawing_random_weights(model_folder: Path) -> None:
    """Every weight is in the conversion: loading draws no random numbers (converter 1 stored the tied
    head alone, and transformers drew the embeddings at random before tying them to it)."""
    import torch
    from transformers import AutoModelForCausalLM

    before = torch.random.get_rng_state()
    model = AutoModelForCausalLM.from_pretrained(str(model_folder), dtype=torch.float32)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    from kvgate.models import resolve_model

    record = current_record(model_folder, resolve_model("smollm2-135m").gguf_path())
    assert record is not None and record["converter"] == CONVERTER_VERSION
    from kvgate.engines.vllm.model import needs_renamed_embeddings

    assert needs_renamed_embeddings(model_folder) is None  # vLLM loads it as it is


def test_processes_starting_together_convert_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two callers on a fresh cache: the second waits on the lock, then finds the first's conversion."""
    import threading

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)))
    target = tmp_path / "cache" / "m"
    calls: list[str] = []
    started = threading.Event()

    def slow_convert(name: str, source: Path, folder: Path) -> None:
        calls.append(threading.current_thread().name)
        started.set()
        with converted_model.new_version(folder) as tmp:
            (tmp / WEIGHTS).write_bytes(b"weights")
            threading.Event().wait(0.3)  # the other caller arrives while this one converts
            (tmp / RECORD).write_text(json.dumps(record_of(name, source, tmp / WEIGHTS)))

    monkeypatch.setattr(converted_model, "convert", slow_convert)
    first = threading.Thread(target=converted_model.ensure_converted, args=("m", gguf, target), name="first")
    first.start()
    assert started.wait(10)
    second = threading.Thread(
        target=converted_model.ensure_converted, args=("m", gguf, target), name="second"
    )
    second.start()
    first.join(10)
    second.join(10)
    assert calls == ["first"]
    assert current_record(target, gguf) is not None


def test_an_unwritable_cache_is_a_bad_input(tmp_path: Path) -> None:
    from kvgate.errors import BadInput

    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder belongs")
    with pytest.raises(BadInput, match="KVGATE_CACHE"):
        converted_model.ensure_converted("m", tmp_path / "model.gguf", blocker / "m")
