#!/usr/bin/env bash
# bench_noise.sh — the measurements behind `run --noise calibrated`
# (docs/design.md §7.2), on the CPU with the built-in trainer made
# nondeterministic on purpose (RC_CPU_SUM_ORDER=shuffled: the embedding
# backward sums its tokens in an order drawn per process):
#
#   clean    CONFIGS correct configurations of tiny (precision, MTP, MoE,
#            dropout, microbatches, policy, fusion, seed, save points
#            rotating; most save at every K, so one run judges N-1 clean
#            pairs of a through leg and a correct resume): every run must
#            say "within run-to-run noise" (or identical); each false alarm
#            (a bug claimed) and each run not decided (exit 4: at the floor,
#            noise too large, or an excess not reproduced by the other
#            resume leg at K) is listed, and the resume legs that exceeded
#            alone are counted (what judging one leg alone would have
#            called a bug). The margin of each
#            resumed leg is printed: the largest deviation over what the rule
#            allows (trace: r / allowed per step and column; state: the
#            state's RMS relative difference over its allowed), so the distance
#            to a false alarm is seen.
#   bugs     every catalogue bug in the configuration its catalogue test uses,
#            REPS times: caught or not, by which check (an exact one: census,
#            exact trace column, the state's non-float part; or a calibrated
#            one, with its ratio to the noise), the verdict's words.
#   bytes    the same clean configuration with --noise bytes: A/A fails (exit
#            2): the noise is real.
#   cost     wall time of one calibrated verdict against one leg (tiny, N=10,
#            K=5), and training steps per verdict for each mode.
#
#   RC_BIN=build/resumecheck [CONFIGS=30] [SEED_BASE=1000] [REPS=3] [PARTS="clean bugs bytes cost"] \
#     bash bench/bench_noise.sh
set -u
RC_BIN=${RC_BIN:-build/resumecheck}
CONFIGS=${CONFIGS:-30}
SEED_BASE=${SEED_BASE:-1000} # the clean configurations' seeds: SEED_BASE + i
REPS=${REPS:-3}
PARTS=${PARTS:-"clean bugs bytes cost"}
JOBS=${JOBS:-2}
D=$(mktemp -d /tmp/rc_bench_noise.XXXXXX)
trap 'rm -rf "$D"' EXIT
export RC_CPU_SUM_ORDER=shuffled
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# margin DIR: per resumed leg "leg worst-trace-score worst-state-score status"
margin() {
  python3 - "$1/report.json" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
f = r["calibration"]["rule"]["factor"] if r.get("calibration") else 4
legs = {}
for c in r["checks"]:
    if c.get("judged") != "calibrated":
        continue
    leg = c["b"]["leg"]
    e = legs.setdefault(leg, {"trace": 0.0, "state": 0.0, "status": []})
    e["status"].append(c["status"])
    k = c.get("calibration") or {}
    for col in k.get("columns", []):
        if col["kind"] == "noisy" and col["worst_step"] is not None and col["worst_r"]:
            a = col["worst_allowed"] or 0
            e["trace"] = max(e["trace"], col["worst_r"] / a if a else math.inf)
    if c["kind"] == "state" and k.get("r") is not None and k.get("allowed"):
        e["state"] = max(e["state"], k["r"] / k["allowed"])
for leg, e in legs.items():
    print(leg, "%.3g" % e["trace"], "%.3g" % e["state"], ",".join(sorted(set(e["status"]))))
PY
}

CONFIG_LIST=()
make_configs() {
  local PRECS=("--precision bf16" "--precision fp32" "--precision fp16 --loss-scale-window 3"
    "--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2"
    "--precision fp8")
  local MTPS=("--mtp-depths 2 --mtp-repeated-layer" "--mtp-depths 1" "--mtp-depths 0 --mtp-separate-layers"
    "--mtp-depths 2 --mtp-separate-layers")
  local MOES=("" "--moe-layers none" "--moe-layers 0,1 --moe-scoring softmax")
  local DROPS=("" "--dropout 0.1")
  local MICROS=("--microbatches 2" "--microbatches 1" "--microbatches 3")
  local POLS=(resolve persist)
  local FUS=(on off)
  local SAVES=("--save-at every" "--save-at every" "--save-at 1,5,9" "--save-at auto" "--save-at every")
  for i in $(seq 0 $((CONFIGS - 1))); do
    CONFIG_LIST+=("${PRECS[$((i % 5))]} ${MTPS[$((i % 4))]} ${MOES[$((i % 3))]} ${DROPS[$(((i / 5) % 2))]} ${MICROS[$(((i / 2) % 3))]} --first-microbatch-policy ${POLS[$(((i / 3) % 2))]} --grad-accum-fusion ${FUS[$(((i / 7) % 2))]} --seed $((SEED_BASE + i)) ${SAVES[$((i % 5))]}")
  done
}

if want clean; then
  make_configs
  echo "== clean: ${#CONFIG_LIST[@]} configurations, --noise calibrated --aa 2, N=10"
  runs=0 alarms=0 undecided=0 judged=0 worst_t=0 worst_s=0 lone=0
  for c in "${CONFIG_LIST[@]}"; do
    runs=$((runs + 1))
    rm -rf "$D/c"
    # shellcheck disable=SC2086 # the flags are words
    "$RC_BIN" run $c --steps 10 --noise calibrated --out "$D/c" --jobs "$JOBS" --progress off >"$D/c.out" 2>&1
    rc=$?
    v=$(python3 -c "import json;print(json.load(open('$D/c/report.json'))['verdict'])" 2>/dev/null)
    m=$(margin "$D/c")
    n=$(echo "$m" | grep -c .)
    judged=$((judged + n))
    # resume legs whose own excess no other resume leg at its K showed (not
    # reproduced): each would be a false alarm if that leg were judged alone
    l=$(python3 -c "import json;print(len({c['b']['leg'] for c in json.load(open('$D/c/report.json'))['checks'] if (c.get('calibration') or {}).get('not_reproduced')}))" 2>/dev/null)
    lone=$((lone + ${l:-0}))
    t=$(echo "$m" | awk '{print $2}' | sort -g | tail -1)
    s=$(echo "$m" | awk '{print $3}' | sort -g | tail -1)
    worst_t=$(python3 -c "print(max(float('$worst_t'), float('${t:-0}')))")
    worst_s=$(python3 -c "print(max(float('$worst_s'), float('${s:-0}')))")
    if [ $rc = 4 ]; then
      # not decided (at the floor, or noise too large): not a pass, not a
      # bug claimed; counted apart from false alarms
      undecided=$((undecided + 1))
      echo "NOT DECIDED exit $rc ($v): $c"
      grep -E "^verdict" "$D/c.out" | sed 's/^/    /'
    elif [ $rc != 0 ]; then
      alarms=$((alarms + 1))
      echo "FALSE ALARM exit $rc ($v): $c"
      grep -E "^verdict" "$D/c.out" | sed 's/^/    /'
    else
      printf 'ok  %-14s legs %-2s trace %-8s state %-8s %s\n' "$v" "$n" "$t" "$s" "$c"
    fi
  done
  echo "clean: $runs runs, $judged clean pairs (a fresh leg, a correct resume from its checkpoint) judged, $alarms false alarm(s), $undecided not decided (exit 4), $lone resume leg(s) exceeding alone (not reproduced); largest margin: trace $worst_t, state $worst_s of the allowed"
fi

if want bugs; then
  echo "== bugs: each catalogue bug in its catalogue configuration, --noise calibrated, $REPS times"
  OVER="--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2"
  BUGS=(
    "rng-not-saved|--dropout 0.1 --save-at 5"
    "data-position-not-saved|--save-at 5"
    "optimizer-step-not-saved|--save-at 5"
    "scheduler-not-restored|--save-at 5"
    "loss-scaler-not-saved|--precision fp16 --loss-scale-window 3 --save-at 5"
    "expert-bias-not-saved|--save-at 5"
    "amax-history-not-saved|--precision fp8 --save-at 5"
    "grad-buffer-not-zeroed-after-load|--save-at 5"
    "moments-saved-in-bf16|--save-at 5"
    "hysteresis-not-saved|$OVER --save-at 3"
    "adam-step-from-iteration|$OVER --save-at 5"
    "save-draws-rng|--dropout 0.1 --save-at 5"
    "warmup-from-process-start|--save-at 5"
    "min-lr-default-after-resume|--save-at 5"
    "bias-correction-fp32-after-load|--save-at 5"
    "clip-grad-default-after-resume|--clip-grad 0.5 --save-at 5"
    "loss-scale-window-default-after-resume|--precision fp16 --loss-scale-window 3 --save-at 5"
    "expert-bias-device-copy-stale-after-load|--save-at 5"
    "half-weight-copy-not-rebuilt-after-load|--save-at 5"
    "consumed-samples-saved-short|--save-at 5"
    "expert-bias-update-skipped-after-resume|--save-at 5"
    "sampler-epoch-not-set-after-resume|--epoch-samples 20 --save-at 5"
    "seed: --first-microbatch-policy legacy|--first-microbatch-policy legacy --save-at 5"
  )
  for entry in "${BUGS[@]}"; do
    bug=${entry%%|*} flags=${entry#*|}
    if [ "${bug#seed: }" != "$bug" ]; then inj=() name=${bug#seed: }; else inj=(--inject "$bug") name=$bug; fi
    "$RC_BIN" bugs 2>/dev/null | grep -qx -- "${inj[1]:-x}" || [ ${#inj[@]} = 0 ] ||
      { echo "$name: not in this build's catalogue"; continue; }
    caught=0 how=""
    for r in $(seq 1 "$REPS"); do
      rm -rf "$D/b"
      # shellcheck disable=SC2086
      "$RC_BIN" run $flags "${inj[@]}" --seed $((3000 + r)) --steps 10 --noise calibrated --out "$D/b" \
        --jobs "$JOBS" --progress off >"$D/b.out" 2>&1
      rc=$?
      [ $rc = 1 ] && caught=$((caught + 1))
      how=$(python3 - "$D/b/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no report"); sys.exit()
exact = [c["name"] for c in r["checks"] if c.get("judged") == "exact" and c["status"] == "differs"]
cal = [(c["name"], (c.get("calibration") or {}).get("ratio")) for c in r["checks"]
       if c.get("judged") == "calibrated" and c["status"] == "exceeds-noise"]
aa = [c["name"] for c in r["checks"] if c.get("judged") == "noise" and c["status"] == "differs"]
parts = []
if exact: parts.append("exact: " + ", ".join(exact))
if cal: parts.append("calibrated: " + ", ".join("%s (%s)" % (n, "inf" if x is None else "%.3gx" % x) for n, x in cal))
if aa: parts.append("A/A: " + ", ".join(aa))
print(r["verdict"] + ("; " + "; ".join(parts) if parts else ""))
PY
)
    done
    echo "$name: caught $caught/$REPS; last: $how"
  done
fi

if want bytes; then
  echo "== bytes: a clean configuration judged byte for byte under the same switch"
  rm -rf "$D/y"
  "$RC_BIN" run --steps 10 --save-at 5 --aa --out "$D/y" --jobs "$JOBS" --progress off >"$D/y.out" 2>&1
  echo "exit $?: $(grep -E '^verdict' "$D/y.out")"
fi

if want cost; then
  echo "== cost: tiny, N=10, K=5 (wall seconds; steps per verdict)"
  now() { date +%s.%N; }
  for mode in "one leg" "bytes" "bytes --aa" "calibrated"; do
    rm -rf "$D/w"
    t0=$(now)
    case $mode in
    "one leg") "$RC_BIN" train --steps 10 --out "$D/w" >/dev/null 2>&1 ;;
    bytes) env -u RC_CPU_SUM_ORDER "$RC_BIN" run --steps 10 --save-at 5 --out "$D/w" --jobs "$JOBS" --progress off >/dev/null 2>&1 ;;
    "bytes --aa") env -u RC_CPU_SUM_ORDER "$RC_BIN" run --steps 10 --save-at 5 --aa --out "$D/w" --jobs "$JOBS" --progress off >/dev/null 2>&1 ;;
    calibrated) "$RC_BIN" run --steps 10 --save-at 5 --noise calibrated --out "$D/w" --jobs "$JOBS" --progress off >/dev/null 2>&1 ;;
    esac
    t1=$(now)
    steps=10
    [ -f "$D/w/report.json" ] && steps=$(python3 -c "import json;print(json.load(open('$D/w/report.json'))['config']['training_steps'])")
    printf '%-12s %6.2f s  %s training steps (%.1f N)\n' "$mode" "$(python3 -c "print($t1 - $t0)")" "$steps" "$(python3 -c "print($steps / 10)")"
  done
fi
