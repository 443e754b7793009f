"""Structured output: find one record in a long staff directory and return it as JSON that satisfies a
JSON schema.

The directory is a list of one-line records ("Record 48213: Mara Quint, aged 41, works as a pilot in
Lisbon.") grown until the prompt reaches the target length; the asked record sits at the cell's depth.
The prompt shows the schema (types and required keys); the validator's schema (``expected``, judged by
``json_schema``) is the same schema with each property pinned by ``const`` to the record's values, so a
well-formed answer about the wrong record, or with a corrupted value, fails.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import check_depths, check_lengths, check_positive, fit_within
from kvgate.workload.generators.prompts import user_prompt
from kvgate.workload.tokenizer import PromptTokenizer


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST = _words(
    "Ada Bruno Carla Dmitri Elena Farid Greta Hugo Ines Jonas Kira Lars Maya Nikos Olga Pavel Quinn Rosa "
    "Sami Tara Umar Vera Wim Xenia Yusuf Zora Amir Bea Cyril Dana Emil Fern Gus Hana Ivo Jade Kofi Lena Milo "
    "Nora Otto Pia Rafael Sofia Teo Una Viktor Wanda"
)
LAST = _words(
    "Abara Bellini Castell Dunmore Eskildsen Fairley Garnier Holt Ibarra Jansen Kowalski Lindqvist Moreau "
    "Nakamura Okafor Petrov Quint Romero Sandoval Tanaka Uribe Varga Whitlock Yilmaz Zeller Achebe Brandt "
    "Coelho Dragan Engel Foster Grieve Hadley Ivers Juarez Keller Lowry Mendes Novak Orsini Pryce Rourke"
)
ROLES = _words(
    "pilot nurse carpenter librarian chemist baker surveyor architect translator electrician gardener "
    "pharmacist plumber geologist teacher welder astronomer tailor locksmith veterinarian"
)
CITIES = _words(
    "Lisbon Oslo Nairobi Lima Hanoi Quebec Tbilisi Porto Cusco Dakar Bergen Cordoba Zagreb Tunis Malmo "
    "Seville Krakow Accra Valparaiso Tallinn"
)

INTRO = "Below is the staff directory of a company, one record per line."


@dataclass(frozen=True, kw_only=True)
class StructuredOutputParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    max_new_tokens: int = 128

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=256)
        check_depths(self.depths)
        check_positive(per_cell=self.per_cell, max_new_tokens=self.max_new_tokens)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "role": {"type": "string"},
        "city": {"type": "string"},
    },
    "required": ["id", "name", "age", "role", "city"],
    "additionalProperties": False,
}


def pinned_schema(record: dict[str, Any]) -> dict[str, Any]:
    """SCHEMA with every property also required to equal `record`'s value."""
    props = {k: {**v, "const": record[k]} for k, v in SCHEMA["properties"].items()}
    return {**SCHEMA, "properties": props}


def _line(r: dict[str, Any]) -> str:
    return f"Record {r['id']}: {r['name']}, aged {r['age']}, works as a {r['role']} in {r['city']}."


@dataclass(frozen=True)
class StructuredOutputGenerator:
    name: str
    version: str = "1"
    params_type: type = StructuredOutputParams

    def generate(
        self, params: StructuredOutputParams, rng: random.Random, tok: PromptTokenizer
    ) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(
        self, p: StructuredOutputParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer
    ) -> CaseDraft:
        names = [f"{first} {last}" for first in FIRST for last in LAST]
        size = min(len(names), max(8, cell.length // 8))
        records = [
            {
                "id": i,
                "name": name,
                "age": rng.randrange(21, 70),
                "role": rng.choice(ROLES),
                "city": rng.choice(CITIES),
            }
            for i, name in zip(rng.sample(range(10000, 100000), size), rng.sample(names, size), strict=True)
        ]
        target, others = records[0], records[1:]
        question = (
            f"Return the record with id {target['id']} as a JSON object that satisfies this JSON schema: "
            f"{json.dumps(SCHEMA)}. Reply with the JSON object only."
        )

        def build(n: int) -> Messages:
            at = round(cell.depth * min(n, len(others)))
            lines = [_line(r) for r in [*others[:at], target, *others[at:n]]]
            return user_prompt(INTRO, "\n".join(lines), question)

        n = fit_within(build, cell.length, tok, max_n=len(others), what=f"{len(records)} records")
        return draft(
            cell,
            p,
            task="structured_output",
            messages=build(n),
            validator="json_schema",
            expected=pinned_schema(target),
            question=question,
        )
