"""Tool calling: choose the right tool and fill its arguments from a fact buried in long notes.

A system message describes the tools (OpenAI function specs, rendered as JSON by `tools_system_prompt`)
and the reply format ``{"name": ..., "arguments": {...}}``. The user message holds notes (a haystack
sized to the target length) with one fact at the cell's depth, then a request that needs that fact. The
expected call, tool name and exact arguments, is judged by ``tool_call``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import check_choice, check_depths, check_lengths, check_positive
from kvgate.workload.generators.haystacks import HAYSTACKS
from kvgate.workload.generators.prompts import haystack_prompt, user_prompt
from kvgate.workload.generators.structured_output import CITIES
from kvgate.workload.tokenizer import PromptTokenizer


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


TOOLS: tuple[dict[str, Any], ...] = (
    _function(
        "get_weather",
        "Weather forecast for a city.",
        {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    ),
    _function(
        "convert_currency",
        "Convert an amount of money between currencies.",
        {
            "amount": {"type": "number"},
            "from_currency": {"type": "string", "description": "ISO 4217 code, e.g. EUR"},
            "to_currency": {"type": "string", "description": "ISO 4217 code"},
        },
    ),
    _function("lookup_order", "Status of a customer order.", {"order_id": {"type": "string"}}),
    _function(
        "book_room",
        "Book a meeting room for a whole day.",
        {"room": {"type": "string"}, "date": {"type": "string", "description": "YYYY-MM-DD"}},
    ),
)

CALL_FORMAT = (
    'To call a tool, reply with one JSON object of the form {"name": <tool name>, "arguments": '
    "{<argument name>: <value>, ...}} and nothing else."
)


def tools_system_prompt(tools: Sequence[dict[str, Any]]) -> str:
    """System text that describes `tools` (OpenAI function specs) and the expected call format."""
    return f"You can call the following tools:\n{json.dumps(list(tools))}\n\n{CALL_FORMAT}"


CURRENCIES = ("EUR", "USD", "JPY", "GBP", "CHF", "SEK", "CAD", "BRL")

Scenario = tuple[str, str, dict[str, Any]]
"""(fact placed in the notes, request at the end, expected call)."""


def _weather(rng: random.Random) -> Scenario:
    city, unit = rng.choice(CITIES), rng.choice(["celsius", "fahrenheit"])
    return (
        f"The team offsite this year takes place in {city}.",
        f"Call the right tool to get the weather forecast, in {unit}, for the city where the team offsite "
        "takes place.",
        {"name": "get_weather", "arguments": {"city": city, "unit": unit}},
    )


def _currency(rng: random.Random) -> Scenario:
    source, target = rng.sample(CURRENCIES, 2)
    amount = rng.randrange(100, 10000)
    return (
        f"The consulting invoice came to {amount} {source}.",
        f"Call the right tool to convert the amount of the consulting invoice into {target}.",
        {
            "name": "convert_currency",
            "arguments": {"amount": amount, "from_currency": source, "to_currency": target},
        },
    )


def _order(rng: random.Random) -> Scenario:
    order = f"ORD-{rng.randrange(100000, 1000000)}"
    return (
        f"The replacement part was shipped under order number {order}.",
        "Call the right tool to look up the status of the order for the replacement part.",
        {"name": "lookup_order", "arguments": {"order_id": order}},
    )


def _room(rng: random.Random) -> Scenario:
    date = f"2025-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    room = rng.choice(["Aurora", "Basalt", "Cedar", "Delta", "Ember", "Fjord"])
    return (
        f"The design review is scheduled for {date}.",
        f"Call the right tool to book the {room} room for the day of the design review.",
        {"name": "book_room", "arguments": {"room": room, "date": date}},
    )


SCENARIOS: tuple[Callable[[random.Random], Scenario], ...] = (_weather, _currency, _order, _room)
INTRO = "Here are my notes from the last few weeks."


@dataclass(frozen=True, kw_only=True)
class ToolCallParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    haystack: str = "essay"
    max_new_tokens: int = 96

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=512)
        check_depths(self.depths)
        check_choice("haystack", self.haystack, HAYSTACKS)
        check_positive(per_cell=self.per_cell, max_new_tokens=self.max_new_tokens)


@dataclass(frozen=True)
class ToolCallGenerator:
    name: str
    version: str = "1"
    params_type: type = ToolCallParams

    def generate(self, params: ToolCallParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(
        self, p: ToolCallParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer
    ) -> CaseDraft:
        fact, request, call = rng.choice(SCENARIOS)(rng)
        seed = rng.random()
        system = {"role": "system", "content": tools_system_prompt(TOOLS)}
        messages = haystack_prompt(
            lambda context: (system, *user_prompt(INTRO, context, request)),
            p.haystack,
            [(cell.depth, fact)],
            seed,
            cell.length,
            tok,
        )
        return draft(
            cell,
            p,
            task="tool_call",
            messages=messages,
            validator="tool_call",
            expected=call,
            question=request,
            haystack=p.haystack,
        )
