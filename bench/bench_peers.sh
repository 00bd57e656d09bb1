#!/usr/bin/env bash
# bench_peers.sh — resumecheck's CUDA core against the PyTorch peers a user
# would pick (issue "The GPU core at and beyond compiled PyTorch"), in one
# run: for every shape, every round runs each peer and the core once, so a
# drift of the machine between runs lands on all of them alike. Run from the
# repo root on the GPU machine:
#
#   RC_BIN=build/resumecheck OUT=/dir bash bench/bench_peers.sh
#
# PEER_SHAPES  (default "dense dense16 moe"; dense_fp8 and moe_fp8 run the core
#              alone at --precision fp8, to set against its bf16 rows):
#   dense    gpu-small without MoE: B8 x M2, S1024, V32768
#   dense16  the same with B16 x M1 and V50304
#   moe      gpu-small as it is (decoder layer 11 and the MTP layer MoE, E8 top-2)
# PEER_MODES   (default "compile-whole compile-whole-det eager"): torch_peer.py
#   modes. compile-whole compiles the whole microbatch forward as one graph,
#   with the experts as grouped GEMMs (torch._grouped_mm) where this PyTorch
#   has them; -det runs it under torch.use_deterministic_algorithms, the peer
#   that promises what resumecheck promises.
# PEER_ROUNDS  (default 2). Compiled peers cache their kernels (inductor's
#   cache), so round 1 pays the compilation and later rounds mostly do not;
#   the step times exclude it either way (steps after --warmup 3).
#
# PEER_BASE_BIN, PEER_BASE_MODULE: an earlier build of the core (binary and
#   CUDA module) run beside this one in every round as the peer
#   "resumecheck-base", so a change is measured before and after in one run.
#
# tokens/s: the median step time of steps 4..23 for PyTorch (20 timed after 3
# warm-up), of steps 3..12 for the core (from its timing.csv), B*S*M tokens a
# step. Peak memory: PyTorch's max_memory_allocated; the core's as
# nvidia-smi's used-memory peak above the idle baseline, which includes the
# CUDA context (~0.5 GiB), so it overstates the core a little.
# Output: $OUT/bench_peers/results.jsonl (one line per run) and a table of
# medians with the median per-round ratio core / peer.
set -u
OUT_DIR="${OUT:-/tmp}/bench_peers"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
RC_BIN="${RC_BIN:-./build/resumecheck}"
TMO="${PEER_TIMEOUT:-300}"
JSONL="$OUT_DIR/results.jsonl"
: > "$JSONL"

shape_flags() { # SHAPE -> "core flags|torch flags|B|M"
  case "$1" in
  dense) echo "--preset gpu-small --moe-layers none|--no-moe|8|2" ;;
  dense16) echo "--preset gpu-small --moe-layers none --micro-batch 16 --microbatches 1 --vocab 50304|--no-moe --batch 16 --microbatches 1 --vocab 50304|16|1" ;;
  moe) echo "--preset gpu-small||8|2" ;;
  # the core alone at fp8 (cuBLASLt E4M3 GEMMs), against its own bf16 rows above
  dense_fp8) echo "--preset gpu-small --moe-layers none --precision fp8|-|8|2" ;;
  moe_fp8) echo "--preset gpu-small --precision fp8|-|8|2" ;;
  *) return 1 ;;
  esac
}

run_peer() { # SHAPE ROUND MODE TORCHFLAGS
  local name="torch_$1_$3_r$2"
  # shellcheck disable=SC2086 # the flags are words
  timeout "$TMO" "$PY" bench/torch_peer.py --mode "$3" --steps 20 --warmup 3 $4 \
    > "$OUT_DIR/$name.out" 2> "$OUT_DIR/$name.err"
  local rc=$? line
  line=$(grep '^{' "$OUT_DIR/$name.out" | tail -n 1)
  if [ -n "$line" ]; then
    echo "${line%\}}, \"peer\": \"$3\", \"shape_name\": \"$1\", \"round\": $2}" | tee -a "$JSONL"
  else
    echo "{\"peer\": \"$3\", \"shape_name\": \"$1\", \"round\": $2, \"error\": \"exit $rc\"}" | tee -a "$JSONL"
    tail -n 5 "$OUT_DIR/$name.err" >&2
  fi
}

run_core() { # SHAPE ROUND COREFLAGS B M [PEERNAME BIN MODULE]
  local dir="$OUT_DIR/core" smi="$OUT_DIR/core_smi.txt" smi_pid="" base
  local peer="${6:-resumecheck}" bin="${7:-$RC_BIN}" module="${8:-${RC_CUDA_MODULE:-}}"
  rm -rf "$dir"
  : > "$smi"
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2> /dev/null | head -n 1)
  if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$smi" 2> /dev/null &
    smi_pid=$!
  fi
  # shellcheck disable=SC2086
  env ${module:+RC_CUDA_MODULE="$module"} timeout "$TMO" "$bin" train --device cuda --steps 12 --out "$dir" $3 \
    > "$OUT_DIR/${peer}_$1_r$2.out" 2> "$OUT_DIR/${peer}_$1_r$2.err"
  local rc=$?
  if [ -n "$smi_pid" ]; then kill "$smi_pid" 2> /dev/null; wait "$smi_pid" 2> /dev/null; fi
  "$PY" - "$dir/timing.csv" "$smi" "${base:-0}" "$rc" "$1" "$2" "$4" "$5" "$peer" << 'EOF' | tee -a "$JSONL"
import csv, json, statistics, sys
timing, smi, base, rc, shape, rnd, B, M, peer = sys.argv[1:10]
d = {"peer": peer, "shape_name": shape, "round": int(rnd)}
try:
    rows = [r for r in csv.DictReader(open(timing))
            if r.get("phase", "step") == "step" and 3 <= int(r["step"]) <= 12]
    med = statistics.median(float(r["seconds"]) for r in rows)
    d.update(tokens_per_s=int(B) * 1024 * int(M) / med, step_ms_median=med * 1e3, steps_timed=len(rows))
except Exception as e:
    d["error"] = "exit %s: %s" % (rc, e)
vals = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
d["peak_mem_gib"] = (max(vals) - int(base)) / 1024 if vals else None
print(json.dumps(d))
EOF
}

for round in $(seq 1 "${PEER_ROUNDS:-2}"); do
  for shape in ${PEER_SHAPES:-dense dense16 moe}; do
    IFS='|' read -r core_flags torch_flags B M <<< "$(shape_flags "$shape")" ||
      { echo "unknown shape '$shape'" >&2; continue; }
    for mode in ${PEER_MODES:-compile-whole compile-whole-det eager}; do
      [ "$torch_flags" = - ] || run_peer "$shape" "$round" "$mode" "$torch_flags"
    done
    run_core "$shape" "$round" "$core_flags" "$B" "$M"
    if [ -n "${PEER_BASE_BIN:-}" ]; then
      run_core "$shape" "$round" "$core_flags" "$B" "$M" resumecheck-base "$PEER_BASE_BIN" \
        "${PEER_BASE_MODULE:-}"
    fi
  done
done

echo
"$PY" - "$JSONL" << 'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = lambda v: statistics.median(v) if v else float("nan")
print("%-8s %-18s %6s %10s %9s %9s %10s  %s" % ("shape", "peer", "rounds", "tokens/s", "step ms",
      "peak GiB", "core/peer", "notes"))
for shape in dict.fromkeys(r["shape_name"] for r in rows):
    core = {r["round"]: r["tokens_per_s"] for r in rows
            if r["shape_name"] == shape and r["peer"] == "resumecheck" and r.get("tokens_per_s")}
    for peer in dict.fromkeys(r["peer"] for r in rows if r["shape_name"] == shape):
        rs = [r for r in rows if r["shape_name"] == shape and r["peer"] == peer and r.get("tokens_per_s")]
        if not rs:
            err = next((r.get("error") for r in rows if r["shape_name"] == shape and r["peer"] == peer), "")
            print("%-8s %-18s %6d %10s  %s" % (shape, peer, 0, "-", err))
            continue
        ratio = med([core[r["round"]] / r["tokens_per_s"] for r in rs if r["round"] in core])
        mem = [r["peak_mem_gib"] for r in rs if r.get("peak_mem_gib") is not None]
        notes = rs[0].get("moe_path") or ""
        print("%-8s %-18s %6d %10.0f %9.1f %9s %10s  %s" % (
            shape, peer, len(rs), med([r["tokens_per_s"] for r in rs]), med([r["step_ms_median"] for r in rs]),
            "%.1f" % med(mem) if mem else "-", "-" if peer == "resumecheck" else "%.2fx" % ratio, notes))
print("medians over rounds; core/peer: median of the per-round ratios of tokens/s")
EOF
