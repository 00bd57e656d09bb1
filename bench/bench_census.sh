#!/usr/bin/env bash
# bench_census.sh — what the state census costs (docs/census.md): every
# census a run's legs wrote (timing.csv `census` rows and phases: a
# batched fingerprint pass over weights and moments plus a small text
# file), against each leg's wall time and the run's; and, when the build
# has it, `--save-at auto` against a single K (more save points, more legs)
# in the same session. REPEAT rounds, medians.
#
#   RC_BIN=build/resumecheck FLAGS="--preset tiny" N=20 K=10 REPEAT=3 [AUTO=0] bash bench/bench_census.sh
set -u
RC_BIN=${RC_BIN:-build/resumecheck}
N=${N:-20}
K=${K:-10}
REPEAT=${REPEAT:-3}
read -r -a F <<<"${FLAGS:---preset tiny}"
D=$(mktemp -d /tmp/rc_bench_census.XXXXXX)
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
median() { python3 -c "import sys,statistics; v=[float(x) for x in sys.argv[1:]]; print('%.3f' % statistics.median(v) if v else '-')" "$@"; }
auto=0
[ "${AUTO:-1}" = 1 ] && "$RC_BIN" run --help 2>&1 | grep -- "--save-at" | grep -q "auto" && auto=1
single=() autos=() census=() legs=() bytes=()
for r in $(seq 1 "$REPEAT"); do
  rm -rf "$D/one" "$D/auto"
  t0=$(now)
  "$RC_BIN" run "${F[@]}" --steps "$N" --save-at "$K" --out "$D/one" --progress off >"$D/one.txt" 2>&1 ||
    { echo "round $r: run exit $?"; tail -5 "$D/one.txt"; exit 1; }
  t1=$(now)
  single+=("$(python3 -c "print('%.3f' % ($t1 - $t0))")")
  # every census row and phase of every leg, and the legs' own wall times
  read -r c l <<<"$(python3 - "$D/one" <<'PY'
import csv, glob, json, sys
c = 0.0
for f in glob.glob(sys.argv[1] + "/*/timing.csv"):
    for row in csv.DictReader(open(f)):
        if row["phase"] == "census":
            c += float(row["seconds"])
rep = json.load(open(sys.argv[1] + "/report.json"))
print("%.6f %.6f" % (c, sum(l["wall_s"] for l in rep["legs"])))
PY
)"
  census+=("$c")
  legs+=("$l")
  bytes+=("$(cat "$D"/one/*/census/*.txt | wc -c)")
  if [ "$auto" = 1 ]; then
    rm -rf "$D/one" # gpu-small: the auto run alone holds ~13 checkpoints of 2.5 GB
    t0=$(now)
    "$RC_BIN" run "${F[@]}" --steps "$N" --save-at auto --out "$D/auto" --progress off >"$D/auto.txt" 2>&1
    rc=$?
    t1=$(now)
    [ "$rc" = 0 ] || { echo "round $r: run --save-at auto exit $rc"; tail -5 "$D/auto.txt"; exit 1; }
    autos+=("$(python3 -c "print('%.3f' % ($t1 - $t0))")")
  fi
  echo "round $r: run ${single[-1]} s, census ${census[-1]} s over legs ${legs[-1]} s${autos:+, auto ${autos[-1]} s}"
done
ms=$(median "${single[@]}")
mc=$(median "${census[@]}")
ml=$(median "${legs[@]}")
echo "census: median ${mc} s summed over the legs (${bytes[0]} bytes of census files), legs ${ml} s, run ${ms} s"
python3 -c "print('census share of leg time: %.2f%%' % (100 * float('$mc') / float('$ml')))"
if [ "$auto" = 1 ]; then
  ma=$(median "${autos[@]}")
  grep -m1 "save points" "$D/auto.txt" || true
  python3 -c "print('--save-at auto: median %s s vs --save-at $K %s s: %.2fx' % ('$ma', '$ms', float('$ma') / float('$ms')))"
fi
