"""Result rows (docs/reference.md, "Result parts"): one validated generation, compared with the control's
tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvgate.engines.base import Generation
from kvgate.rundir.result_part import PROOF_COLUMNS
from kvgate.runner.passes import ArmRun
from kvgate.validators.registry import get_validator
from kvgate.workload.case import Case


def first_divergence(control: Sequence[int] | None, candidate: Sequence[int]) -> int | None:
    """Index of the first output token where the candidate leaves the control's.

    None when the outputs are identical or there is no control output to compare with (the control
    itself, or a control that failed with an engine error); a strict prefix diverges where it ends.
    """
    if control is None:
        return None
    for index, (a, b) in enumerate(zip(control, candidate, strict=False)):
        if a != b:
            return index
    return None if len(control) == len(candidate) else min(len(control), len(candidate))


def result_row(case: Case, gen: Generation, arm_run: ArmRun, control: Sequence[int] | None) -> dict[str, Any]:
    """Validate `gen` for `case` and build its row. An engine error is `fail_kind = "engine_error"`,
    never a validation verdict, so the report can keep it out of the cache-induced failures; a case that
    ran past the engine's time limit is `fail_kind = "timeout"`, a failure of the arm."""
    fail_kind: str | None
    if gen.error is not None:
        passed, fail_kind, detail = False, "timeout" if gen.timed_out else "engine_error", gen.error
    else:
        verdict = get_validator(case.validator)(gen.output_text, case.expected, case.validator_args)
        passed, fail_kind, detail = verdict.passed, verdict.fail_kind, verdict.detail
    return {
        "case_id": case.case_id,
        "arm": arm_run.arm,
        "replicate": arm_run.replicate,
        "attempt": arm_run.attempt,
        "output_text": gen.output_text,
        "output_token_ids": list(gen.output_token_ids),
        "passed": passed,
        "fail_kind": fail_kind,
        "detail": detail,
        "n_prompt_tokens": gen.n_prompt_tokens,
        "n_cached_tokens": gen.n_cached_tokens,
        "n_kv_entries_kept": gen.n_kv_entries_kept,
        "ttft_s": gen.ttft_s,
        "latency_s": gen.latency_s,
        "mean_logprob": gen.mean_logprob,
        "min_logprob": gen.min_logprob,
        "first_divergence": None if gen.error else first_divergence(control, gen.output_token_ids),
        "certificate_bound_max": gen.certificate_bound_max,
        "certificate_bound_mean": gen.certificate_bound_mean,
        "certificate_estimate_mean": gen.certificate_estimate_mean,
        "certificate_relative_bound_mean": gen.certificate_relative_bound_mean,
        "certificate_relative_estimate_mean": gen.certificate_relative_estimate_mean,
        "certificate_cap_share": gen.certificate_cap_share,
        **{column: getattr(gen, column) for column in PROOF_COLUMNS},
    }
