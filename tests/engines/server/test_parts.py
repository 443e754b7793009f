"""The server engine's parts without a server: flags, templates, endpoints, answers and metrics."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")

from kvgate.engines.server.endpoints import parse_endpoints, with_endpoints
from kvgate.engines.server.flags import engine_flags, server_flags
from kvgate.engines.server.launch import check_template, fill_template
from kvgate.engines.server.metrics import preemptions
from kvgate.engines.server.response import MalformedResponse, parse_completion
from kvgate.engines.vllm.args import arm_args, base_engine_args
from kvgate.errors import BadInput
from kvgate.treatments.spec import Composite, Full, Offload, Reuse


def test_an_arms_flags_are_the_in_process_engines_arguments() -> None:
    base = base_engine_args(True, None, None, None)
    control = server_flags(arm_args(base, Full("full"), 1.0))
    assert "--no-enable-prefix-caching" in control and "--enforce-eager" in control
    assert (
        control[control.index("--block-size") + 1] == "128"
        and control[-1] == "--enable-prompt-tokens-details"
    )
    reuse = engine_flags(arm_args(base, Reuse("prefix-reuse"), 1.0, kv_blocks=24))
    assert "--enable-prefix-caching" in reuse
    assert reuse[reuse.index("--num-gpu-blocks-override") + 1] == "24"
    assert reuse[reuse.index("--max-model-len") + 1] == str(23 * 128)
    both = Composite(
        "reuse+offload", of=(Reuse("r"), Offload("o", engine_args={"kv_transfer_config": {"a": 1}}))
    )
    flags = engine_flags(arm_args(base, both, 1.0))
    assert flags[flags.index("--kv-transfer-config") + 1] == '{"a": 1}'


def test_templates() -> None:
    argv = fill_template(
        "{python} serve.py --port {port} {arm_flags} --tail", {"python": "py", "port": "9"}, ["-a", "b"]
    )
    assert argv == ["py", "serve.py", "--port", "9", "-a", "b", "--tail"]
    for bad, message in [
        ("vllm serve --port 8000", "must name {port}"),
        ("vllm serve {modle} --port {port}", "names modle"),
        ("vllm --port {port} --x={arm_flags}", "must be a word of its own"),
        ("vllm 'unclosed --port {port}", "No closing quotation"),
    ]:
        with pytest.raises(BadInput, match=message):
            check_template(bad)


def test_endpoints() -> None:
    assert parse_endpoints(["full=http://h:1/v1/", "*=https://x"]) == {"full": "http://h:1", "*": "https://x"}
    for bad in (["full"], ["full=ftp://x"], ["a b=http://x"], ["full=http://x", "full=http://y"]):
        with pytest.raises(BadInput):
            parse_endpoints(bad)
    assert with_endpoints(None, None, []) == (None, None)
    assert with_endpoints(None, {"retries": 1}, ["*=http://x"]) == (
        "server",
        {"retries": 1, "endpoints": {"*": "http://x"}},
    )
    with pytest.raises(BadInput, match="needs --engine server"):
        with_endpoints("hf", None, ["*=http://x"])


def _body(**choice: object) -> dict[str, object]:
    base = {
        "text": "a b",
        "token_ids": [5, 6],
        "finish_reason": "stop",
        "logprobs": {"token_logprobs": [-0.5, -1.0]},
    }
    usage = {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}}
    return {"choices": [{**base, **choice}], "usage": usage}


def test_a_completion_is_read_strictly() -> None:
    done = parse_completion(_body(), 3)
    assert done.token_ids == (5, 6) and done.cached_tokens == 2 and done.logprobs == (-0.5, -1.0)
    for body, message in [
        (_body(token_ids=None), "token_ids is missing"),
        (_body(token_ids=[1, "x"]), "token_ids is missing"),
        (_body(text=3), "text is missing"),
        (_body(logprobs={"token_logprobs": [-1.0]}), "one logprob per token"),
        ({"choices": []}, "not a list of one choice"),
        ([], "not a JSON object"),
    ]:
        with pytest.raises(MalformedResponse, match=message):
            parse_completion(body, 3)
    with pytest.raises(MalformedResponse, match=r"usage\.prompt_tokens is 3 for a prompt of 4"):
        parse_completion(_body(), 4)


def test_preemptions_from_prometheus_text() -> None:
    text = (
        "# HELP vllm:num_preemptions_total x\n# TYPE vllm:num_preemptions_total counter\n"
        'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0\n'
        'vllm:num_preemptions_total{engine="1",model_name="m"} 2.0\n'
        'vllm:num_preemptions_created{engine="0"} 1.7e9\n'
    )
    assert preemptions(text) == 5
    assert preemptions("vllm:other_total 4\n") is None


def test_the_option_list_matches_the_engines_signature() -> None:
    import inspect

    from kvgate.engines.options import OWN_OPTIONS
    from kvgate.engines.server.engine import ServerEngine

    params = list(inspect.signature(ServerEngine).parameters.values())[1:]
    assert OWN_OPTIONS["server"] == tuple(
        p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD
    )


def test_endpoints_come_from_the_endpoint_option(stub_model: object) -> None:
    from kvgate.engines.server.engine import ServerEngine
    from kvgate.models import resolve_model

    with pytest.raises(BadInput, match="--endpoint ARM=URL"):
        ServerEngine(resolve_model(str(stub_model)), endpoints="http://x")  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="not both"):
        ServerEngine(resolve_model(str(stub_model)), endpoints={"*": "http://x"}, command="x --port {port}")
