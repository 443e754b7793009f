"""What the server engine needs of a serving stack other than vLLM (`Flavour`), and the arm's launch.

A flavour turns an arm's treatment into its own launch flags (and, for a stack configured by file, the
file's text), refuses in its own words what it cannot apply, and reads its own answer: the output
token ids, the prompt length it saw, and the prompt tokens it served from its cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kvgate.engines.kv_cache_facts import KVCacheFacts
from kvgate.engines.server.flavours.applies import Applies
from kvgate.engines.server.response import Completion, MalformedResponse
from kvgate.engines.server.stack_version import VersionAnswer
from kvgate.treatments.spec import Offload, Quantize, Reuse, Treatment

CONFIG_PLACEHOLDER = "{config}"
"""A flag value the session replaces by the path of the arm's config file (`ArmLaunch.config`)."""
SLOTS_PLACEHOLDER = "{slots}"
"""A flag value the session replaces by the folder the arm's server saves its slots' KV in."""


@dataclass(frozen=True)
class ArmLaunch:
    """An arm's launch: its flags, and the text of a config file its flags name as {config}."""

    flags: list[str] = field(default_factory=list)
    config: str | None = None


class Flavour(Protocol):
    @property
    def name(self) -> str:
        """Its key in the registry, which builds it with that name (the name's one statement)."""
        ...

    @property
    def salted(self) -> bool:
        """Whether requests carry a cache_salt the stack honours (else each arm's server is its namespace)."""
        ...

    @property
    def events_path(self) -> str | None:
        """Where the stack's KV cache events are drained (POST, JSON), whose cache-level moves count an
        offload arm's blocks (`tier_events`); None where it has none."""
        ...

    def tier_events(self, body: Any) -> tuple[int, int]:
        """(blocks moved to the offload tier, blocks brought back from it) in a drained events answer."""
        ...

    @property
    def saves_slots(self) -> bool:
        """Whether an offload arm's tier is the stack's slot save and restore (`server/slot_offload.py`)
        rather than a cache tier its answers report on (`Completion.tier_tokens`)."""
        ...

    @property
    def version_answer(self) -> VersionAnswer:
        """Where the stack names its version (`stack_version.py`)."""
        ...

    @property
    def applies(self) -> Applies:
        """What the stack applies (its refusals and `kvgate engines` read this table)."""
        ...

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        """The argv that serves `model` on host:port, before the arm's flags."""
        ...

    def launch(self, treatment: Treatment, kv_blocks: int | None = None) -> ArmLaunch:
        """The arm's flags (and config file); `kv_blocks`: the matrix's pool size, where `applies.pool`
        says the stack takes one (else refused before)."""
        ...

    def refusal(self, treatment: Treatment) -> str | None:
        """Why this stack cannot apply `treatment`, in one line; None when it can."""
        ...

    def request(
        self, model_id: str, prompt: list[int], max_tokens: int, salt: str, measured: bool, reuse: bool
    ) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of a greedy request for `prompt`'s token ids."""
        ...

    def parse(self, body: Any, n_prompt: int) -> Completion:
        """The answer as a Completion, or MalformedResponse naming what is missing."""
        ...

    @property
    def info_path(self) -> str | None:
        """Where the server names the KV dtype it stores (GET, JSON), or None when it names none."""
        ...

    def kv_dtype(self, info: Any) -> str | None:
        """The KV dtype the server's info answer names, or None."""
        ...


@runtime_checkable
class ReadsItsLog(Protocol):
    """A flavour whose server names its KV cache in its log and counts cache hits on /metrics
    (llama-server): the launched session reads both."""

    def kv_cache_in_log(self, log: str) -> KVCacheFacts | None:
        """The KV cache the log says was allocated (types, bytes per cached token), or None."""
        ...

    def cached_total(self, metrics: str) -> int | None:
        """Prompt tokens served from a cache over all requests, from the /metrics text, or None."""
        ...


def quantize_part(treatment: Treatment) -> Quantize | None:
    return next((p for p in treatment.parts() if isinstance(p, Quantize)), None)


def reuse_part(treatment: Treatment) -> Reuse | None:
    return next((p for p in treatment.parts() if isinstance(p, Reuse)), None)


def offload_part(treatment: Treatment) -> Offload | None:
    return next((p for p in treatment.parts() if isinstance(p, Offload)), None)


def engine_args_refusal(treatment: Treatment, flavour: str, own: str = "sets its own flags") -> str | None:
    """Every flavour's last refusal: `engine_args` are vLLM's engine arguments (treatments.spec), which
    no other stack reads; `own` says what the flavour sets instead."""
    if any(p.engine_args for p in (*treatment.parts(), treatment)):
        return f"engine_args are vLLM's; the {flavour} flavour {own}"
    return None


def token_ids(value: Any, where: str) -> tuple[int, ...]:
    """A list of token ids in [0, 2^31), or MalformedResponse naming `where`."""
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31 for v in value
    ):
        raise MalformedResponse(f"{where} is missing or not a list of token ids in [0, 2^31)")
    return tuple(value)


def count(value: Any, where: str, most: int) -> int:
    """An integer in [0, most], or MalformedResponse naming `where`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= most:
        raise MalformedResponse(f"{where} is {value!r}, not a count in [0, {most}]")
    return value


def check_prompt(seen: Any, n_prompt: int, where: str) -> None:
    """The stack's prompt length must be the prompt sent (a stack that re-tokenised it answered another)."""
    if seen != n_prompt:
        raise MalformedResponse(f"{where} is {seen!r} for a prompt of {n_prompt} token ids")
