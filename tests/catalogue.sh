#!/usr/bin/env bash
# catalogue.sh EXPECT_RC EXPECT_STEP EXPECT_FIRST [run flags...]
# Runs `resumecheck run --steps 10 --save-at 5` with the flags and asserts the
# documented signature: the exit code, the first divergent step and the first
# diverging trace column (EXPECT_STEP/EXPECT_FIRST "-" when the run must pass).
set -u
want_rc=$1 want_step=$2 want_first=$3; shift 3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
save=(--save-at 5)
for a in "$@"; do [ "$a" = --save-at ] && save=(); done # the flags name their own K
out=$("$RC_BIN" run "$@" --steps 10 "${save[@]}" --out "$t/run" 2>"$t/err"); rc=$?
echo "$out"
fail=0
[ "$rc" = "$want_rc" ] || { echo "FAIL: exit $rc, expected $want_rc"; cat "$t/err"; fail=1; }
if [ "$want_step" != "-" ]; then
  line=$(grep -m1 -E "(RESUME|A/A) (diverged|failed)|diverged at step" <<<"$out" | grep -m1 -oE "at step [0-9]+: [a-z_0-9, ]+" | head -1)
  step=$(sed -E 's/at step ([0-9]+):.*/\1/' <<<"$line")
  first=$(sed -E 's/at step [0-9]+: ([a-z_0-9]+).*/\1/' <<<"$line")
  [ "$step" = "$want_step" ] || { echo "FAIL: first divergent step '$step', expected $want_step"; fail=1; }
  [ "$first" = "$want_first" ] || { echo "FAIL: first diverging quantity '$first', expected $want_first"; fail=1; }
fi
[ -s "$t/run/report.json" ] || { echo "FAIL: no report.json"; fail=1; }
exit $fail
