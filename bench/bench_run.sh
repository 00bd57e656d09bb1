#!/usr/bin/env bash
# bench_run.sh — what running the legs concurrently buys: the wall time of
# one whole `resumecheck run` (dry-run, legs, checks, reports) against the
# sum of the same legs' `resumecheck train` commands run one after another.
# One run of each, on this machine; the ratio goes to bench/NOTES_run.md.
#
#   bench/bench_run.sh [RESUMECHECK_BINARY]   (default: build-run/resumecheck)
#   N, K, JOBS and FLAGS can be overridden from the environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build-run/resumecheck}
[ -x "$bin" ] || { echo "no binary at $bin (build first)" >&2; exit 66; }
N=${N:-100}
K=${K:-50}
JOBS=${JOBS:-$(nproc)}
read -r -a F <<<"${FLAGS:---preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --first-microbatch-policy legacy}"
D=$(mktemp -d /tmp/rc_bench_run.XXXXXX)
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }

t0=$(now)
set +e
"$bin" run "${F[@]}" --steps "$N" --save-at "$K" --jobs "$JOBS" --out "$D/run" --progress off >"$D/run.txt"
rc=$?
set -e
t1=$(now)
[ "$rc" -le 2 ] || { echo "run failed (exit $rc)" >&2; cat "$D/run.txt" >&2; exit 1; }

# the same three legs, one after another
iter=$(printf 'iter_%07d' "$K")
legs=(
  "through:--steps $N --save-at $K,$N --out $D/seq/through"
  "save:--steps $N --stop-at $K --save-at $K --out $D/seq/save"
  "resume:--steps $N --save-at $N --resume-from $D/seq/save/ckpt/$iter --out $D/seq/resume"
)
sum=0
for leg in "${legs[@]}"; do
  name=${leg%%:*}
  read -r -a args <<<"${leg#*:}"
  s=$(now)
  "$bin" train "${F[@]}" "${args[@]}" --leg "$name" >/dev/null 2>&1
  e=$(now)
  dt=$(awk -v a="$e" -v b="$s" 'BEGIN { print a - b }')
  printf '  %-8s %6.2f s\n' "$name" "$dt"
  [ "$name" = through ] && through_s=$dt
  sum=$(awk -v a="$sum" -v b="$dt" 'BEGIN { print a + b }')
done
# what this machine gives two legs at once: the ceiling of any speed-up
s=$(now)
"$bin" train "${F[@]}" --steps "$N" --save-at "$N" --out "$D/pair/a" >/dev/null 2>&1 &
"$bin" train "${F[@]}" --steps "$N" --save-at "$N" --out "$D/pair/b" >/dev/null 2>&1 &
wait
e=$(now)
pair=$(awk -v a="$e" -v b="$s" 'BEGIN { print a - b }')
printf '  two through legs at once: %.2f s (one alone: %.2f s)\n' "$pair" "$through_s"
wall=$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')
ratio=$(awk -v a="$wall" -v b="$sum" 'BEGIN { print a / b }')
printf 'run (jobs=%s, %s cores): %.2f s; legs one after another: %.2f s; ratio %.2f\n' \
  "$JOBS" "$(nproc)" "$wall" "$sum" "$ratio"
awk -v p="$pair" -v t="$through_s" 'BEGIN { printf "parallel efficiency of this machine for train legs: %.2f (2.00 = two full cores)\n", 2 * t / p }'
echo "command: $bin run ${F[*]} --steps $N --save-at $K --jobs $JOBS --out DIR"
