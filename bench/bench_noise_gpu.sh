#!/usr/bin/env bash
# bench_noise_gpu.sh — the calibrated resume verdict (`run --noise
# calibrated`, docs/design.md §7.2) measured on a GPU, where bench_noise.sh
# measures it on the CPU: one device session of about 5 minutes, every
# arm time-boxed, so a cut-short session still says what it found.
#
#   core    the built-in CUDA core made nondeterministic by
#           RC_CUDA_SUM_ORDER=atomic (the embedding backward by atomicAdd,
#           tests/gpu_noise.sh): clean at (N,K) = (10,5) and (12,3) on tiny
#           and (8,4) on gpu-small (within-noise, 0); the seed's legacy
#           policy (exceeds the noise, 1); a census-caught catalogue bug
#           (optimizer-step-not-saved: exact, 1); the control, the clean
#           configuration judged byte for byte (--aa without --noise): must
#           not pass.
#   torch   tests/trainers/gpu_torch_trainer.py (a small GPT; index_add_'s
#           atomics and SDPA's backward, nothing planted) through `run
#           --trainer exec --noise calibrated`: clean at two configurations
#           (0), each of its four --bug (nonzero: an exact check), and the
#           control byte for byte, whose failure shows the trainer really
#           is nondeterministic on this device (recorded either way).
#   clean   (not in the default PARTS) a clean sweep: CLEAN_TORCH (12) torch
#           and CLEAN_CORE (12) core configurations drawn from their index,
#           each expected within-noise: false alarms on real kernels.
#   cost    wall seconds of one calibrated verdict against one plain train
#           leg of the same N (core tiny, the torch trainer and, with the
#           core part, gpu-small), 1 round;
#           the torch legs' own split (start-up, steps) from their logs.
#
# Each run appends one JSON line to $OUT/noise_gpu.jsonl as it finishes
# (arm, name, config, expected and actual exit, verdict, wall seconds, the
# exact checks that differ, each calibrated check's ratio and margin), and
# keeps its report.json, stdout and leg logs under $OUT/runs/NAME/. A
# table goes to stdout at the end.
#
#   RC_BIN=build-dev/resumecheck OUT=/dir [PARTS="core torch cost"] [BUDGET=400] \
#     [RUN_TIMEOUT=90] bash bench/bench_noise_gpu.sh
#
# BUDGET (seconds) bounds the whole bench: a run whose time-box would not
# fit in what is left is recorded as skipped, never started. DEVICE=cpu is
# a dry run of the plumbing on a machine without a GPU: the core under
# its CPU twin (RC_CPU_SUM_ORDER=shuffled), the torch trainer on the CPU,
# where its kernels are deterministic (the torch control then passes byte
# for byte, and the clean runs are identical: nothing measured).
set -u
RC_BIN=${RC_BIN:-build-dev/resumecheck}
OUT=${OUT:-out/noise_gpu}
PARTS=${PARTS:-"core torch cost"}
BUDGET=${BUDGET:-400}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
PY=${RC_PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
SWITCH=RC_CUDA_SUM_ORDER=atomic
[ "$DEVICE" = cpu ] && SWITCH=RC_CPU_SUM_ORDER=shuffled
case "$RC_BIN" in /*) ;; *) RC_BIN="$PWD/$RC_BIN" ;; esac
mkdir -p "$OUT/runs" || exit 1
JSONL="$OUT/noise_gpu.jsonl"
: >"$JSONL"
D=$(mktemp -d /tmp/rc_bench_noise_gpu.XXXXXX)
trap 'rm -rf "$D"' EXIT
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
T0=$(date +%s.%N)
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$T0" "$(now)"; }
log() { echo "[$(elapsed) s] $*"; }

# left_for LIMIT: the time-box a run gets (LIMIT, or what BUDGET has left),
# empty when under 10 s are left
left_for() {
  python3 -c "import sys; l = float(sys.argv[2]) - float(sys.argv[3]); t = min(float(sys.argv[1]), l); print(int(t) if t >= 10 else '')" \
    "$1" "$BUDGET" "$(elapsed)"
}

# record ARM NAME EXPECT RC WALL DIR CONFIG: one JSON line for a finished
# (or skipped: RC "skip") run. EXPECT: 0, 1, 2, "nonzero".
record() {
  python3 - "$JSONL" "$@" <<'PY'
import json, os, sys
jsonl, arm, name, expect, rc, wall, d, config = sys.argv[1:9]
rec = {"arm": arm, "name": name, "config": config, "expect": expect,
       "exit": None if rc == "skip" else int(rc), "wall_s": None if wall == "" else float(wall)}
if rc == "skip":
    rec["ok"], rec["skipped"] = None, "the bench's BUDGET had no room for its time-box"
else:
    rc = int(rc)
    rec["timed_out"] = rc in (124, 137)
    rec["ok"] = rc != 0 if expect == "nonzero" else rc == int(expect)
try:
    r = json.load(open(os.path.join(d, "report.json")))
except Exception:
    r = None
if r is not None:
    rec["verdict"] = r.get("verdict")
    rec["kernel_switches"] = r.get("kernel_switches")
    rec["training_steps"] = (r.get("config") or {}).get("training_steps")
    rec["legs_wall_s"] = {l.get("name"): l.get("wall_s") for l in r.get("legs", []) if isinstance(l, dict)}
    checks = r.get("checks", [])
    rec["exact_differs"] = [c["name"] for c in checks if c.get("judged") == "exact" and c.get("status") != "identical"]
    fields = sorted({x.get("field") or "" for c in checks if c.get("name", "").startswith("CENSUS")
                     for x in ((c.get("census") or {}).get("differences") or []) if x.get("class") != "local"})
    # the census's differing fields (not the process-local ones, which differ by design): how many, their
    # groups (optimizer.exp_avg, rng.torch_cuda, ...), the first few
    rec["census_differences"] = {"n": len(fields), "groups": sorted({".".join(f.split(".")[:2]).split("/")[0] for f in fields}),
                                 "first": fields[:8]}
    rec["calibrated"] = [
        {k: (c.get("calibration") or {}).get(k) for k in ("step", "what", "r", "envelope", "allowed", "ratio", "resolution", "undecidable")}
        | {"name": c["name"], "status": c.get("status"),
           # the margin: how far the deviation is into what the rule allows (<1 within)
           "of_allowed": (lambda k: k["r"] / k["allowed"] if k.get("r") is not None and k.get("allowed") else None)(c.get("calibration") or {})}
        for c in checks if c.get("judged") == "calibrated"]
    for c, k in zip(rec["calibrated"], [c.get("calibration") or {} for c in checks if c.get("judged") == "calibrated"]):
        # per noisy trace column: its worst step's deviation over what was allowed there
        cols = [{"column": x.get("name"), "worst_step": x.get("worst_step"), "exceed_step": x.get("exceed_step"),
                 "of_allowed": x["worst_r"] / x["worst_allowed"] if x.get("worst_r") is not None and x.get("worst_allowed") else None}
                for x in k.get("columns") or [] if x.get("kind") == "noisy"]
        if cols:
            c["columns"] = cols
    # every check, compactly: which ones differ, by which kind (bytes, exact, noise, calibrated)
    rec["checks"] = [{"name": c["name"], "judged": c.get("judged"), "status": c.get("status")} for c in checks]
# the torch trainer's own split of each leg (its last stderr line), from
# the legs' logs, or the output of a leg run by hand
legs = {}
logs = [(leg, os.path.join(d, leg, "log.txt")) for leg in (sorted(os.listdir(d)) if os.path.isdir(d) else [])]
for leg, p in logs + [("one", d + ".out")]:
    if os.path.isfile(p):
        for line in open(p, errors="replace"):
            if line.startswith("gpu_torch_trainer: leg "):
                legs[leg] = line.split(": ", 2)[-1].strip()
if legs:
    rec["trainer_legs"] = legs
with open(jsonl, "a") as f:
    f.write(json.dumps(rec) + "\n")
print("%-6s %-22s exit %-4s want %-7s %-4s %7s s  %s%s" % (
    arm, name, rec["exit"], expect, {True: "ok", False: "FAIL", None: "skip"}[rec["ok"]],
    "-" if rec["wall_s"] is None else "%.1f" % rec["wall_s"], rec.get("verdict") or "",
    "".join("  [%s %s %s]" % (c["name"], c["status"], "-" if c["of_allowed"] is None else "%.3g of allowed" % c["of_allowed"])
            for c in rec.get("calibrated", []) if c["status"] != "within-noise" or c["of_allowed"] is not None)))
PY
}

# keep NAME DIR: the run's report, stdout and leg logs, for a post-mortem
keep() {
  local k="$OUT/runs/$1" f
  mkdir -p "$k"
  cp "$D/$1.out" "$k/out.txt" 2>/dev/null
  cp "$2/report.json" "$k/" 2>/dev/null
  for f in "$2"/*/log.txt "$2"/*/*/log.txt; do
    [ -f "$f" ] && tail -c 20000 "$f" >"$k/$(basename "$(dirname "$f")")".log.txt
  done
}

# bench ARM NAME EXPECT LIMIT CONFIG-TEXT -- COMMAND...: run COMMAND (its
# --out is $D/NAME) time-boxed, record it
bench() {
  local arm=$1 name=$2 expect=$3 limit=$4 config=$5 t rc t0 t1
  shift 6
  t=$(left_for "$limit")
  if [ -z "$t" ]; then
    record "$arm" "$name" "$expect" skip "" "$D/$name" "$config"
    return
  fi
  log "$arm $name: $config (time-box $t s)"
  t0=$(now)
  timeout -k 10 "$t" "$@" --out "$D/$name" >"$D/$name.out" 2>&1
  rc=$?
  t1=$(now)
  keep "$name" "$D/$name"
  record "$arm" "$name" "$expect" "$rc" "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")" \
    "$D/$name" "$config"
  grep -E "^verdict" "$D/$name.out" | cut -c1-400 | sed 's/^/    /'
  rm -rf "${D:?}/$name"
}

log "bench_noise_gpu: RC_BIN=$RC_BIN OUT=$OUT DEVICE=$DEVICE ($SWITCH) PARTS=\"$PARTS\" BUDGET=$BUDGET s"
"$RC_BIN" --version 2>&1 | head -1 | sed 's/^/    /'
{ nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"; } | head -4 | sed 's/^/    /'
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 |
  tail -1 | sed 's/^/    /'

ATOM=(env "$SWITCH" "$RC_BIN" run --device "$DEVICE" --leg-timeout 120 --progress off)
SEED_FLAGS=(--precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy)
TRAINER="tests/trainers/gpu_torch_trainer.py"
TT="'$PY' '$PWD/$TRAINER' --device $DEVICE --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
EXEC=("$RC_BIN" run --trainer exec --leg-timeout 120 --progress off)

# The order puts what the verdict rests on first, so a budget cut
# short still has the controls and one of each kind.
if want core; then
  bench core core_clean_10_5 0 "$RUN_TIMEOUT" "tiny N=10 K=5 calibrated" -- \
    "${ATOM[@]}" --steps 10 --save-at 5 --noise calibrated
  bench core core_bytes_10_5 nonzero "$RUN_TIMEOUT" "tiny N=10 K=5 --aa byte for byte (control)" -- \
    "${ATOM[@]}" --steps 10 --save-at 5 --aa
  bench core core_seed_10_5 1 "$RUN_TIMEOUT" "tiny N=10 K=5 calibrated, seed: ${SEED_FLAGS[*]}" -- \
    "${ATOM[@]}" --steps 10 --save-at 5 --noise calibrated "${SEED_FLAGS[@]}"
  bench core core_census_10_5 1 "$RUN_TIMEOUT" "tiny N=10 K=5 calibrated, --inject optimizer-step-not-saved" -- \
    "${ATOM[@]}" --steps 10 --save-at 5 --noise calibrated --inject optimizer-step-not-saved
fi
if want torch; then
  bench torch torch_bytes_A nonzero "$RUN_TIMEOUT" "gpt A N=10 K=5 --aa byte for byte (control)" -- \
    "${EXEC[@]}" --train-cmd "$TT" --steps 10 --save-at 5 --aa
  bench torch torch_clean_A 0 "$RUN_TIMEOUT" "gpt A (tied, 2 microbatches, bf16) N=10 K=5 calibrated" -- \
    "${EXEC[@]}" --train-cmd "$TT" --steps 10 --save-at 5 --noise calibrated
  for bug in optimizer-not-saved scheduler-not-restored rng-not-restored sampler-not-restored; do
    bench torch "torch_$bug" nonzero "$RUN_TIMEOUT" "gpt A N=10 K=5 calibrated, --bug $bug" -- \
      "${EXEC[@]}" --train-cmd "$TT --bug $bug" --steps 10 --save-at 5 --noise calibrated
  done
  bench torch torch_clean_B 0 "$RUN_TIMEOUT" "gpt B (untied, 4 microbatches, seed 7) N=12 K=3 calibrated" -- \
    "${EXEC[@]}" --train-cmd "$TT --tie-head off --microbatches 4 --seed 7" --steps 12 --save-at 3 --noise calibrated
fi
if want core; then
  bench core core_clean_12_3 0 "$RUN_TIMEOUT" "tiny N=12 K=3 calibrated" -- \
    "${ATOM[@]}" --steps 12 --save-at 3 --noise calibrated
  if [ "$DEVICE" != cpu ]; then # gpu-small wants more host memory per leg than a CPU dry run has
    bench core core_small_8_4 0 120 "gpu-small N=8 K=4 calibrated" -- \
      "${ATOM[@]}" --preset gpu-small --steps 8 --save-at 4 --noise calibrated
  fi
fi
if want clean; then
  # a clean sweep (PARTS="clean", not in the default): CLEAN_TORCH torch
  # configurations and CLEAN_CORE core ones, each drawn from its index (seed,
  # K, N, microbatches, head, precision), every one expected within-noise:
  # the false-alarm count on real nondeterministic kernels
  for i in $(seq 1 "${CLEAN_TORCH:-12}"); do
    # microbatches 1, 2 or 4: the trainer's batch of 8 splits into those
    n=$((8 + i % 5)) k=$((1 + i % 6)) mb=$((1 << (i % 3)))
    [ "$k" -ge "$n" ] && k=$((n - 1))
    tie=$([ $((i % 2)) = 0 ] && echo on || echo off)
    prec=$([ $((i % 3)) = 0 ] && echo fp32 || echo bf16)
    cfg="--seed $((100 + i)) --microbatches $mb --tie-head $tie --precision $prec"
    bench clean "clean_torch_$i" 0 "$RUN_TIMEOUT" "gpt $cfg N=$n K=$k calibrated" -- \
      "${EXEC[@]}" --train-cmd "$TT $cfg" --steps "$n" --save-at "$k" --noise calibrated
  done
  for i in $(seq 1 "${CLEAN_CORE:-12}"); do
    n=$((8 + i % 7)) k=$((1 + i % 7))
    [ "$k" -ge "$n" ] && k=$((n - 1))
    prec=$([ $((i % 2)) = 0 ] && echo bf16 || echo fp32)
    cfg="--seed $((200 + i)) --microbatches $((1 + i % 3)) --precision $prec"
    # shellcheck disable=SC2086
    bench clean "clean_core_$i" 0 "$RUN_TIMEOUT" "tiny $cfg N=$n K=$k calibrated" -- \
      "${ATOM[@]}" $cfg --steps "$n" --save-at "$k" --noise calibrated
  done
fi
if want cost; then
  # one round: a plain leg of N=10 saving at 5 and 10, against the
  # calibrated verdicts measured above (their wall_s), the same N and K
  bench cost cost_core_leg 0 60 "tiny one train leg N=10 save 5,10" -- \
    env "$SWITCH" "$RC_BIN" train --device "$DEVICE" --steps 10 --save-at 5,10
  bench cost cost_torch_leg 0 60 "gpt A one leg N=10 save 5,10" -- \
    "$PY" "$TRAINER" --device "$DEVICE" --steps 10 --save-at 5,10 --leg one
  if [ "$DEVICE" != cpu ]; then # against core_small_8_4 (PARTS="core cost")
    bench cost cost_small_leg 0 90 "gpu-small one train leg N=8 save 4,8" -- \
      env "$SWITCH" "$RC_BIN" train --device "$DEVICE" --preset gpu-small --steps 8 --save-at 4,8
  fi
fi

log "done: $JSONL"
python3 - "$JSONL" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("\n%-6s %-24s %-6s %-8s %-5s %-8s %s" % ("arm", "run", "exit", "want", "ok", "wall s", "verdict; calibrated checks (deviation / allowed)"))
for r in rows:
    cal = "; ".join("%s %s%s" % (c["name"], c["status"], "" if c["of_allowed"] is None else " %.3g" % c["of_allowed"])
                    for c in r.get("calibrated", []))
    print("%-6s %-24s %-6s %-8s %-5s %-8s %s%s" % (
        r["arm"], r["name"], "-" if r["exit"] is None else r["exit"], r["expect"],
        {True: "ok", False: "FAIL", None: "skip"}[r["ok"]], "-" if r["wall_s"] is None else "%.1f" % r["wall_s"],
        r.get("verdict") or "", "; " + cal if cal else ""))
by = {r["name"]: r for r in rows}
def wall(n):
    r = by.get(n)
    return r["wall_s"] if r and r.get("ok") else None
for verdict, leg in (("core_clean_10_5", "cost_core_leg"), ("torch_clean_A", "cost_torch_leg"),
                     ("core_small_8_4", "cost_small_leg")):
    v, l = wall(verdict), wall(leg)
    if v and l:
        print("cost: %s %.1f s, one leg (%s) %.1f s: %.2fx" % (verdict, v, leg, l, v / l))
for r in rows:
    for leg, line in sorted((r.get("trainer_legs") or {}).items()):
        if r["name"] in ("torch_clean_A", "cost_torch_leg"):
            print("  %s %s: %s" % (r["name"], leg, line))
ctl = by.get("torch_bytes_A")
if ctl and ctl["exit"] is not None:
    print("torch control (byte for byte): exit %s: %s" % (ctl["exit"],
          "the trainer is nondeterministic on this device" if ctl["exit"] == 2 else
          "identical bytes: the device's kernels were deterministic here, the calibrated runs judged no noise" if ctl["exit"] == 0 else
          "not an A/A failure (see runs/torch_bytes_A)"))
bad = [r["name"] for r in rows if r["ok"] is False]
skipped = [r["name"] for r in rows if r["ok"] is None]
print("%d runs, %d as expected, %d not%s%s" % (len(rows), sum(r["ok"] is True for r in rows), len(bad),
      (": " + ", ".join(bad)) if bad else "", ("; skipped (budget): " + ", ".join(skipped)) if skipped else ""))
PY
