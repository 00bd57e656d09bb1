#!/usr/bin/env bash
# bench_verdict.sh — what a verdict costs over one leg: the wall time of
# `resumecheck run --steps N --save-at K` (through, save and resume legs, the
# checks and reports) against one `train` leg of N steps saving at K and N,
# in the same session, interleaved, REPEAT rounds; medians and the median of
# the per-round ratios. With SCHEDULING="critical-first shared" each round
# runs `run` once per --gpu-scheduling value (the first is the one the
# ratio is for); the arms `hashes` and `full` set --through-checkpoints
# instead (with the default scheduling), and `no-handoff` runs with
# --no-handoff. With OLD_BIN (and OLD_MODULE, its CUDA module) each round
# also runs an earlier build's `run` and one leg, for its own ratio in the
# same rounds (arm `old`). Also each leg's phases as the legs record them
# (timing.csv: start-up, wait, load, saves, step-lock waits, summed step
# time) and the checkpoint's size.
#
#   RC_BIN=build/resumecheck FLAGS="--preset gpu-small --device cuda" N=20 K=10 \
#     REPEAT=3 SCHEDULING="critical-first shared" bash bench/bench_verdict.sh
set -u
RC_BIN=${RC_BIN:-build/resumecheck}
N=${N:-20}
K=${K:-10}
REPEAT=${REPEAT:-3}
read -r -a F <<<"${FLAGS:---preset tiny}"
read -r -a ARMS <<<"${SCHEDULING:-default}"
D=$(mktemp -d /tmp/rc_bench_verdict.XXXXXX)
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
secs() { python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }
declare -A runs
legs=()
for r in $(seq 1 "$REPEAT"); do
  line="round $r:"
  for a in "${ARMS[@]}"; do
    rm -rf "$D/run_$a"
    extra=()
    case "$a" in
    default) ;;
    hashes | hashes-all | full | on-demand) extra=(--through-checkpoints "$a") ;; # what the through leg keeps
    no-handoff) extra=(--no-handoff) ;;
    *) extra=(--gpu-scheduling "$a") ;;
    esac
    t0=$(now)
    "$RC_BIN" run "${F[@]}" "${extra[@]}" --steps "$N" --save-at "$K" --out "$D/run_$a" --progress off \
      >"$D/run_$a.txt" 2>&1
    rc=$?
    t1=$(now)
    [ "$rc" = 0 ] || { echo "round $r: run ($a) exit $rc"; tail -5 "$D/run_$a.txt"; exit 1; }
    runs[$a]="${runs[$a]:-} $(secs "$t0" "$t1")"
    line="$line run ($a) $(secs "$t0" "$t1") s,"
  done
  rm -rf "$D/leg"
  t1=$(now)
  "$RC_BIN" train "${F[@]}" --steps "$N" --save-at "$K,$N" --out "$D/leg" >"$D/leg.txt" 2>&1
  lrc=$?
  t2=$(now)
  [ "$lrc" = 0 ] || { echo "round $r: leg exit $lrc"; tail -5 "$D/leg.txt"; exit 1; }
  legs+=("$(secs "$t1" "$t2")")
  line="$line one leg ${legs[-1]} s"
  if [ -n "${OLD_BIN:-}" ]; then # the earlier build, its run and its leg, in the same round
    rm -rf "$D/run_old" "$D/leg_old"
    t0=$(now)
    RC_CUDA_MODULE="${OLD_MODULE:-}" "$OLD_BIN" run "${F[@]}" --steps "$N" --save-at "$K" \
      --out "$D/run_old" --progress off >"$D/run_old.txt" 2>&1 || { echo "old run failed"; tail -3 "$D/run_old.txt"; }
    t1=$(now)
    RC_CUDA_MODULE="${OLD_MODULE:-}" "$OLD_BIN" train "${F[@]}" --steps "$N" --save-at "$K,$N" \
      --out "$D/leg_old" >"$D/leg_old.txt" 2>&1 || { echo "old leg failed"; tail -3 "$D/leg_old.txt"; }
    t2=$(now)
    old_runs="${old_runs:-} $(secs "$t0" "$t1")"
    old_legs="${old_legs:-} $(secs "$t1" "$t2")"
    line="$line; old: run $(secs "$t0" "$t1") s, leg $(secs "$t1" "$t2") s"
  fi
  echo "$line"
done
if [ -n "${OLD_BIN:-}" ]; then
  python3 - "$old_runs" "$old_legs" <<'PY'
import statistics, sys
runs = [float(x) for x in sys.argv[1].split()]
legs = [float(x) for x in sys.argv[2].split()]
print("old build: run median %.3f s, one leg median %.3f s, median per-round ratio %.3fx"
      % (statistics.median(runs), statistics.median(legs), statistics.median([a / b for a, b in zip(runs, legs)])))
PY
fi
for a in "${ARMS[@]}"; do
  python3 - "$a" "${runs[$a]}" "${legs[*]}" <<'PY'
import statistics, sys
runs = [float(x) for x in sys.argv[2].split()]
legs = [float(x) for x in sys.argv[3].split()]
ratios = [a / b for a, b in zip(runs, legs)]
print("verdict (run, %s) median %.3f s, one leg median %.3f s, median per-round ratio %.3fx (target <= 1.15x)"
      % (sys.argv[1], statistics.median(runs), statistics.median(legs), statistics.median(ratios)))
PY
done
echo "checkpoint: $(du -sb "$D/leg/ckpt/iter_$(printf %07d "$K")" | cut -f1) bytes"
# phases of one leg's timing.csv on one line, steps summed
phases() {
  awk -F, '$1 == "step" { s += $3; n++; next } $1 != "phase" { printf "%s%s=%.2f ", $1, ($2 != "" ? "@" $2 : ""), $3 }
    END { printf "steps(%d)=%.2f\n", n, s }' "$1"
}
for a in "${ARMS[@]}"; do
  for t in "$D/run_$a"/*/timing.csv; do
    [ -f "$t" ] && echo "  $a $(basename "$(dirname "$t")"): $(phases "$t")"
  done
done
echo "  one leg: $(phases "$D/leg/timing.csv")"
for a in "${ARMS[@]}"; do # the run's own time line (report.json)
  python3 - "$a" "$D/run_$a/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
p = r.get("phases_s", {})
legs = ", ".join("%s %.2f-%.2f" % (l["label"], l["started_s"], l["started_s"] + l["wall_s"])
                 for l in r["legs"] if l.get("started_s") is not None)
print("  %s run %.2f s: prepare %.2f, legs %.2f, checks %.2f; %s"
      % (sys.argv[1], r["wall_s"], p.get("prepare", -1), p.get("legs", -1), p.get("checks", -1), legs))
PY
done
