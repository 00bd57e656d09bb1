#!/usr/bin/env bash
# bench_verdict.sh — what a verdict costs over one leg: the wall time of
# `resumecheck run --steps N --save-at K` (through, save and resume legs, the
# checks and reports) against one `train` leg of N steps saving at K and N,
# in the same session, interleaved, REPEAT rounds; medians and the median of
# the per-round ratios. Also each leg's start-up phases as the legs record
# them (timing.csv) and the checkpoint's size.
#
#   RC_BIN=build/resumecheck FLAGS="--preset gpu-small --device cuda" N=20 K=10 \
#     REPEAT=3 bash bench/bench_verdict.sh
set -u
RC_BIN=${RC_BIN:-build/resumecheck}
N=${N:-20}
K=${K:-10}
REPEAT=${REPEAT:-3}
read -r -a F <<<"${FLAGS:---preset tiny}"
D=$(mktemp -d /tmp/rc_bench_verdict.XXXXXX)
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
secs() { python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }
runs=() legs=()
for r in $(seq 1 "$REPEAT"); do
  rm -rf "$D/run" "$D/leg"
  t0=$(now)
  "$RC_BIN" run "${F[@]}" --steps "$N" --save-at "$K" --out "$D/run" --progress off >"$D/run.txt" 2>&1
  rc=$?
  t1=$(now)
  "$RC_BIN" train "${F[@]}" --steps "$N" --save-at "$K,$N" --out "$D/leg" >"$D/leg.txt" 2>&1
  lrc=$?
  t2=$(now)
  [ "$rc" = 0 ] && [ "$lrc" = 0 ] || { echo "round $r: run exit $rc, leg exit $lrc"; tail -5 "$D/run.txt" "$D/leg.txt"; exit 1; }
  runs+=("$(secs "$t0" "$t1")") legs+=("$(secs "$t1" "$t2")")
  echo "round $r: run ${runs[-1]} s, one leg ${legs[-1]} s"
done
python3 - "${runs[*]}" "${legs[*]}" <<'PY'
import statistics, sys
runs = [float(x) for x in sys.argv[1].split()]
legs = [float(x) for x in sys.argv[2].split()]
ratios = [a / b for a, b in zip(runs, legs)]
print("verdict (run) median %.3f s, one leg median %.3f s, median per-round ratio %.3fx (target <= 1.15x)"
      % (statistics.median(runs), statistics.median(legs), statistics.median(ratios)))
PY
echo "checkpoint: $(du -sb "$D/leg/ckpt/iter_$(printf %07d "$K")" | cut -f1) bytes"
for leg in through save resume; do
  [ -f "$D/run/$leg/timing.csv" ] || continue
  echo "--- $leg timing.csv (phases, first steps)"
  grep -vE '^[0-9]+,' "$D/run/$leg/timing.csv" | head -20
  grep -E '^[0-9]+,' "$D/run/$leg/timing.csv" | head -3
done
echo "--- report legs"
grep -E "^\s+(through|save|resume)" "$D/run.txt" | head -5
