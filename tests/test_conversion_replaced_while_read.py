"""A conversion replaced while another process reads the older one: the reader reads one conversion
whole (every file of the same conversion, its record current), never files of two, and a superseded
folder is removed only once no process reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kvgate import converted_model
from kvgate.converted_model import RECORD, WEIGHTS, conversion_lock, current_record, new_version, record_of

FILES = ("config.json", "tokenizer.json", WEIGHTS)
REPLACEMENTS = 40

READER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kvgate import converted_model
    from kvgate.errors import BadInput

    def refuse(*args):
        raise SystemExit("the reader converted: it found no whole conversion")

    converted_model.convert = refuse
    gguf, target, stop, ready = (Path(a) for a in sys.argv[1:5])
    seen, retries = set(), 0
    while not stop.exists():
        try:
            folder = converted_model.ensure_converted("m", gguf, target)
        except BadInput as exc:  # a clear retry, never a torn read
            retries += 1
            continue
        generations = []
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            generations.append((folder / name).read_text())
            time.sleep(0.002)  # a slow load: a replacement lands between these reads
        if len(set(generations)) != 1:
            raise SystemExit(f"torn: {generations} in {folder}")
        seen.add(generations[0])
        ready.touch()  # the writer starts replacing once a read is under way
    print(len(seen), retries)
    """
)


def _write_generation(folder: Path, generation: int, gguf: Path) -> None:
    for name in FILES:
        (folder / name).write_text(f"generation {generation}")
    (folder / RECORD).write_text(json.dumps(record_of("m", gguf, folder / WEIGHTS)))


def _replace(target: Path, generation: int, gguf: Path) -> None:
    """What a conversion does, with stand-in files: a new version published under the lock."""
    with conversion_lock(target), new_version(target) as folder:
        _write_generation(folder, generation, gguf)


def test_a_reader_never_reads_a_half_replaced_conversion(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)))
    target = tmp_path / "cache" / "m"
    _replace(target, 0, gguf)
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(gguf), str(target), str(stop), str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # on a loaded machine the reader's imports alone take seconds
        while not ready.exists() and reader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        for generation in range(1, REPLACEMENTS + 1):
            _replace(target, generation, gguf)
            time.sleep(0.003)  # a read takes ~6 ms: replacements land between and during them
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    seen, _retries = map(int, out.split())
    assert seen > 1, "the reader read while conversions were replaced"
    assert (target / WEIGHTS).read_text() == f"generation {REPLACEMENTS}"
    _replace(target, REPLACEMENTS + 1, gguf)  # the reader has ended: nothing pins the older ones
    assert [p for p in target.parent.iterdir() if p.is_dir() and not p.is_symlink()] == [target.resolve()]


def test_a_folder_read_in_this_process_outlives_its_replacement(tmp_path: Path) -> None:
    """The folder `ensure_converted` returned stays whole after a newer conversion replaces it; it is
    removed by a later conversion once no process pins it (here: once unpinned)."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)))
    target = tmp_path / "m"
    _replace(target, 1, gguf)
    first = converted_model.ensure_converted("m", gguf, target)
    _replace(target, 2, gguf)
    assert [(first / name).read_text() for name in FILES] == ["generation 1"] * 3
    second = converted_model.ensure_converted("m", gguf, target)
    assert second != first and (second / WEIGHTS).read_text() == "generation 2"
    converted_model._unpin(first)
    _replace(target, 3, gguf)
    assert not first.exists() and second.exists()  # second is still pinned here


def test_a_folder_of_an_older_layout_is_read_then_moved_aside(tmp_path: Path) -> None:
    """A target that is a folder (converter 2 wrote one) is read in place, and replaced by a link."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)))
    target = tmp_path / "m"
    target.mkdir()
    _write_generation(target, 1, gguf)
    assert converted_model.ensure_converted("m", gguf, target) == target
    _replace(target, 2, gguf)
    assert target.is_symlink() and (target / WEIGHTS).read_text() == "generation 2"
    assert current_record(target, gguf) is not None
    moved = [p for p in tmp_path.iterdir() if p.is_dir() and not p.is_symlink() and p != target.resolve()]
    assert [(p / WEIGHTS).read_text() for p in moved] == ["generation 1"]  # pinned by this process
