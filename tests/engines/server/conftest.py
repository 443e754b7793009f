"""Fixtures for the server engine's tests: the smoke suite frozen with the word tokenizer, the answers
the stub gives for it, a model folder without weights, and a stub running in a thread."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvgate.engines.fake import reference_answer
from kvgate.workload.freeze import freeze
from kvgate.workload.schema import read_workload
from kvgate.workload.tokenizer import WordTokenizer

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from stub_server import StubServer, answer_key, start_stub  # noqa: E402


@pytest.fixture(scope="session")
def answers(smoke_workload: Path) -> dict[str, str]:
    """Each smoke prompt's reference answer, keyed as the stub looks it up."""
    return {
        answer_key(list(c.prompt_token_ids or ())): reference_answer(c)
        for c in read_workload(smoke_workload).cases
    }


@pytest.fixture(scope="session")
def answers_file(answers: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stub") / "answers.json"
    path.write_text(json.dumps(answers))
    return path


@pytest.fixture(scope="session")
def smoke_workload(stub_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke suite in word ids (what the stub reads), frozen under the stub model's folder name, so
    a run on the server engine with `--model stub_model` accepts it as frozen for its model."""

    class ForTheStub(WordTokenizer):
        name = str(stub_model)

    path = tmp_path_factory.mktemp("workloads") / "smoke.stub.parquet"
    freeze(["smoke"], path, ForTheStub(), seed=0)
    return path


@pytest.fixture(scope="session")
def stub_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder the stub stands for: a config, no weights (the server engine loads none)."""
    folder = tmp_path_factory.mktemp("stub-model")
    (folder / "config.json").write_text(json.dumps({"model_type": "stub"}))
    return folder


@pytest.fixture
def stub(answers: dict[str, str]) -> Iterator[StubServer]:
    server = start_stub(answers, latency_s=0.002)
    yield server
    server.stop()
