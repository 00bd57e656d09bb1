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
# PEER_PROFILE (default unset; 1 to turn on): the first round's compile-whole
#   run of each shape also profiles 3 steps after its timed ones
#   (torch_peer.py --profile-out), so its timing is as in any other round, and
#   writes $OUT/bench_peers/profile_<shape>_compile-whole.txt: kernel time per
#   step by category (GEMM, attention, triton, optimizer, ...) and the top
#   kernels. Only that run's peak (smi) may carry the profiler's own memory.
#
# PEER_BASE_BIN, PEER_BASE_MODULE: an earlier build of the core (binary and
#   CUDA module) run beside this one in every round as the peer
#   "resumecheck-base", so a change is measured before and after in one run.
# PEER_CORE_ENV: "VAR=value ..." set for this build's runs only, not the
#   base's (an opt-in measured against the same build without it: then
#   PEER_BASE_BIN is this build).
#
# tokens/s: the median step time of steps 4..23 for PyTorch (20 timed after 3
# warm-up), of steps 3..12 for the core (from its timing.csv), B*S*M tokens a
# step; step_ms_mean, the mean of the same steps, shows what the median hides
# (occasional slow steps). Peak memory, the same way for every run: nvidia-smi's used-memory
# peak above the idle baseline taken just before the run (sampled every
# 200 ms; peak_mem_smi_gib, "peak GiB (smi)"), which includes the CUDA context
# (~0.5 GiB) and, for PyTorch, its caching allocator's reserve. PyTorch's
# max_memory_allocated, which counts neither, is kept beside it
# (peak_mem_alloc_gib, "alloc GiB"; also peak_mem_gib, as before). The core's
# peak_mem_gib is its smi peak, as before. Without nvidia-smi these are null.
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

# nvidia-smi's used memory (MiB), every 200 ms into FILE while a run goes on,
# so that every run's peak is read the same way: smi_start FILE sets
# SMI_BASE (the idle baseline just before) and SMI_PID; smi_stop ends it.
# Without nvidia-smi FILE stays empty and the peak comes out null.
smi_start() { # FILE
  SMI_PID="" SMI_BASE=""
  : > "$1"
  command -v nvidia-smi > /dev/null 2>&1 || return 0
  SMI_BASE=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2> /dev/null | head -n 1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$1" 2> /dev/null &
  SMI_PID=$!
}

smi_stop() {
  if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2> /dev/null; wait "$SMI_PID" 2> /dev/null; fi
  SMI_PID=""
}

run_peer() { # SHAPE ROUND MODE TORCHFLAGS
  local name="torch_$1_$3_r$2" smi="$OUT_DIR/peer_smi.txt" prof=()
  if [ "${PEER_PROFILE:-0}" != 0 ] && [ "$2" = 1 ] && [ "$3" = compile-whole ]; then
    prof=(--profile-out "$OUT_DIR/profile_$1_$3.txt")
  fi
  smi_start "$smi"
  # shellcheck disable=SC2086 # the flags are words
  timeout "$TMO" "$PY" bench/torch_peer.py --mode "$3" --steps 20 --warmup 3 $4 ${prof[@]+"${prof[@]}"} \
    > "$OUT_DIR/$name.out" 2> "$OUT_DIR/$name.err"
  local rc=$? line
  smi_stop
  line=$(grep '^{' "$OUT_DIR/$name.out" | tail -n 1)
  [ -n "$line" ] || tail -n 5 "$OUT_DIR/$name.err" >&2
  "$PY" - "$line" "$smi" "${SMI_BASE:-0}" "$rc" "$1" "$2" "$3" << 'EOF' | tee -a "$JSONL"
import json, sys
line, smi, base, rc, shape, rnd, mode = sys.argv[1:8]
try:
    d = json.loads(line)
    d.update(peer=mode, shape_name=shape, round=int(rnd))
    if d.get("step_ms"):
        d["step_ms_mean"] = sum(d["step_ms"]) / len(d["step_ms"])
    d["peak_mem_alloc_gib"] = d.get("peak_mem_gib")  # max_memory_allocated, kept as peak_mem_gib too
except ValueError:
    d = {"peer": mode, "shape_name": shape, "round": int(rnd), "error": "exit %s" % rc}
vals = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
d["peak_mem_smi_gib"] = (max(vals) - int(base)) / 1024 if vals else None
print(json.dumps(d))
EOF
}

run_core() { # SHAPE ROUND COREFLAGS B M [PEERNAME BIN MODULE]
  local dir="$OUT_DIR/core" smi="$OUT_DIR/core_smi.txt"
  local peer="${6:-resumecheck}" bin="${7:-$RC_BIN}" module="${8:-${RC_CUDA_MODULE:-}}"
  rm -rf "$dir"
  smi_start "$smi"
  # shellcheck disable=SC2086
  local extra=()
  [ "$peer" = resumecheck ] && read -ra extra <<< "${PEER_CORE_ENV:-}"
  env ${extra[@]+"${extra[@]}"} ${module:+RC_CUDA_MODULE="$module"} timeout "$TMO" "$bin" train --device cuda --steps 12 --out "$dir" $3 \
    > "$OUT_DIR/${peer}_$1_r$2.out" 2> "$OUT_DIR/${peer}_$1_r$2.err"
  local rc=$?
  smi_stop
  "$PY" - "$dir/timing.csv" "$smi" "${SMI_BASE:-0}" "$rc" "$1" "$2" "$4" "$5" "$peer" << 'EOF' | tee -a "$JSONL"
import csv, json, statistics, sys
timing, smi, base, rc, shape, rnd, B, M, peer = sys.argv[1:10]
d = {"peer": peer, "shape_name": shape, "round": int(rnd)}
try:
    rows = [r for r in csv.DictReader(open(timing))
            if r.get("phase", "step") == "step" and 3 <= int(r["step"]) <= 12]
    med = statistics.median(float(r["seconds"]) for r in rows)
    d.update(tokens_per_s=int(B) * 1024 * int(M) / med, step_ms_median=med * 1e3, steps_timed=len(rows),
             step_ms_mean=1e3 * statistics.mean(float(r["seconds"]) for r in rows))
except Exception as e:
    d["error"] = "exit %s: %s" % (rc, e)
vals = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
d["peak_mem_gib"] = (max(vals) - int(base)) / 1024 if vals else None
d["peak_mem_smi_gib"] = d["peak_mem_gib"]  # the name every run's smi peak has
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
print("%-8s %-18s %6s %10s %9s %9s %14s %9s %10s  %s" % ("shape", "peer", "rounds", "tokens/s", "step ms",
      "mean ms", "peak GiB (smi)", "alloc GiB", "core/peer", "notes"))
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
        # smi: every run, context and allocator reserve included; alloc: PyTorch's max_memory_allocated
        smi = [r["peak_mem_smi_gib"] for r in rs if r.get("peak_mem_smi_gib") is not None]
        alloc = [r["peak_mem_alloc_gib"] for r in rs if r.get("peak_mem_alloc_gib") is not None]
        notes = rs[0].get("moe_path") or ""
        means = [r["step_ms_mean"] for r in rs if r.get("step_ms_mean") is not None]
        print("%-8s %-18s %6d %10.0f %9.1f %9s %14s %9s %10s  %s" % (
            shape, peer, len(rs), med([r["tokens_per_s"] for r in rs]), med([r["step_ms_median"] for r in rs]),
            "%.1f" % med(means) if means else "-",
            "%.1f" % med(smi) if smi else "-", "%.1f" % med(alloc) if alloc else "-",
            "-" if peer == "resumecheck" else "%.2fx" % ratio, notes))
print("medians over rounds; step ms: the median step; mean ms: the mean of the same steps (slow steps show);")
print("core/peer: median of the per-round ratios of tokens/s; peak GiB (smi): nvidia-smi's")
print("used-memory peak above the idle baseline (CUDA context and allocator reserve included); alloc GiB:")
print("torch.cuda.max_memory_allocated")
EOF
