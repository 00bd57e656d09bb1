#!/usr/bin/env bash
# bench_gpu.sh - throughput of resumecheck's CUDA core vs the PyTorch peer
# (bench/torch_peer.py) on the gpu-small preset. Run from the repo root on
# the GPU machine after building into ./build with CUDA (or RC_BIN=path).
#   OUT=/some/dir bash bench/bench_gpu.sh
# BENCH_MODES picks the PyTorch modes (default: eager deterministic compile);
# BENCH_CORE picks resumecheck variants: "default" (the preset as is: bf16
# attention) and/or "fp32attn" (--attention-precision fp32).
# BENCH_REPEAT=N (default 1) runs every mode and variant N times,
# interleaved (round 1 of each, then round 2, ...): eager PyTorch is bound by
# the host CPU, and its tokens/s moved between 70k and 114k across runs on the
# same H200 model, so one pairing proves little. The table then gives each
# mode's median and range over the rounds, and the median of the per-round
# ratios to eager. One JSON line per run, with its "round".
set -u

OUT_DIR="${OUT:-/tmp}/bench_gpu"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
TMO="${BENCH_TIMEOUT:-240}"
STEPS="${BENCH_STEPS:-20}"
JSONL="$OUT_DIR/results.jsonl"
: > "$JSONL"

run_json() { # name cmd... : run with a timeout, keep the last JSON line
  name="$1"; shift
  timeout "$TMO" "$@" > "$OUT_DIR/$name.out" 2> "$OUT_DIR/$name.err"
  rc=$?
  line=$(grep '^{' "$OUT_DIR/$name.out" | tail -n 1)
  if [ -n "$line" ]; then
    echo "${line%\}}, \"round\": $ROUND}" | tee -a "$JSONL"
  else
    echo "{\"mode\": \"$name\", \"error\": \"exit $rc\", \"round\": $ROUND}" | tee -a "$JSONL"
    tail -n 5 "$OUT_DIR/$name.err" >&2
  fi
}

ROUND=0
run_json gemm_peak "$PY" bench/torch_peer.py --gemm-peak

# ---- resumecheck's own core, with nvidia-smi sampling used memory
RC_BIN="${RC_BIN:-./build/resumecheck}"
run_core() { # mode extra-flags...
mode="$1"; shift
CORE="$OUT_DIR/core"
rm -rf "$CORE"
SMI_LOG="$OUT_DIR/core_smi.txt"
: > "$SMI_LOG"
SMI_PID=""
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$SMI_LOG" 2> /dev/null &
  SMI_PID=$!
fi
BASE_MIB=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2> /dev/null | head -n 1)
timeout "$TMO" "$RC_BIN" train --preset gpu-small --device cuda --steps 12 --out "$CORE" "$@" \
  > "$OUT_DIR/core.out" 2> "$OUT_DIR/core.err"
core_rc=$?
if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2> /dev/null; wait "$SMI_PID" 2> /dev/null; fi
"$PY" - "$CORE/timing.csv" "$SMI_LOG" "${BASE_MIB:-}" "$core_rc" "$CORE/trace.csv" "$mode" "$ROUND" << 'EOF' | tee -a "$JSONL"
import csv, json, statistics, sys
timing, smi, base, rc, trace, mode, rnd = sys.argv[1:8]
tok = 8 * 1024 * 2
d = {"mode": mode, "round": int(rnd)}
try:
    rows = [r for r in csv.DictReader(open(timing))
            if r.get("phase", "step") == "step" and 3 <= int(r["step"]) <= 12]
    med = statistics.median(float(r["seconds"]) for r in rows)
    d.update(tokens_per_s=tok / med, step_ms_median=med * 1e3, steps_timed=len(rows))
except Exception as e:
    d["error"] = "exit %s: %s" % (rc, e)
try:  # used-memory delta seen by nvidia-smi (whole-process, includes the CUDA context)
    vals = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
    d["peak_mem_gib"] = (max(vals) - int(base or 0)) / 1024 if vals else None
except Exception:
    d["peak_mem_gib"] = None
try:
    tr = list(csv.DictReader(open(trace)))
    d["loss_first"], d["loss_last"] = float(tr[0]["loss"]), float(tr[-1]["loss"])
except Exception:
    pass
print(json.dumps(d))
EOF
}
for ROUND in $(seq 1 "${BENCH_REPEAT:-1}"); do
  for mode in ${BENCH_MODES:-eager deterministic compile}; do
    run_json "torch_$mode" "$PY" bench/torch_peer.py --mode "$mode" --steps "$STEPS" --warmup 3
  done
  for v in ${BENCH_CORE:-default}; do
    case "$v" in
    default) run_core resumecheck ;;
    fp32attn) run_core resumecheck_fp32attn --attention-precision fp32 ;;
    *) echo "unknown BENCH_CORE variant '$v'" >&2 ;;
    esac
  done
done

echo
"$PY" - "$JSONL" << 'EOF'
import json, statistics, sys
rows = []
for l in open(sys.argv[1]):
    try:
        rows.append(json.loads(l))
    except Exception:
        pass
gemm = next((r.get("tflops") for r in rows if r.get("mode") == "gemm_peak"), None)
fpt = next((r.get("model_flops_per_token") for r in rows if r.get("model_flops_per_token")), None)
eager = {r.get("round"): r["tokens_per_s"] for r in rows if r.get("mode") == "eager" and r.get("tokens_per_s")}
modes = []
for r in rows:
    if r.get("mode") != "gemm_peak" and r.get("mode") not in modes:
        modes.append(r.get("mode"))
if gemm:
    print("gemm peak (bf16 8192^3): %.1f TFLOP/s" % gemm)
f = lambda v, fmt: (fmt % v) if isinstance(v, (int, float)) else "-"
med = lambda xs: statistics.median(xs) if xs else None
print("%-20s %6s %10s %17s %10s %9s %9s %8s" % ("mode", "rounds", "tokens/s", "range", "step ms",
      "mem GiB", "vs eager", "MFU*"))
for m in modes:
    rs = [r for r in rows if r.get("mode") == m and r.get("tokens_per_s")]
    if not rs:
        print("%-20s %6s %10s  %s" % (m, 0, "-", next((r.get("error") for r in rows if r.get("mode") == m), "")))
        continue
    toks = [r["tokens_per_s"] for r in rs]
    t = med(toks)
    ratio = med([r["tokens_per_s"] / eager[r.get("round")] for r in rs if r.get("round") in eager])
    mfu = t * fpt / (gemm * 1e12) if fpt and gemm else None
    rng = "%.0f-%.0f" % (min(toks), max(toks)) if len(toks) > 1 else "-"
    print("%-20s %6d %10s %17s %10s %9s %9s %8s" % (m, len(rs), f(t, "%.0f"), rng,
          f(med([r.get("step_ms_median") for r in rs if r.get("step_ms_median")]), "%.1f"),
          f(max((r.get("peak_mem_gib") or 0) for r in rs) or None, "%.2f"), f(ratio, "%.3f"), f(mfu, "%.3f")))
print("tokens/s and step ms: medians over rounds; vs eager: median of the per-round ratios")
print("* MFU here = tokens/s * model_flops_per_token / measured gemm peak (approximate)")
EOF
