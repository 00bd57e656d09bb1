#!/usr/bin/env bash
# robust_alloc_fail_at.sh — an allocation that fails anywhere in `train`'s
# init or in a step ends the leg with exit 75 and a message naming what was
# asked (bytes, which buffer or op), never an abort. The failure is forced
# with RC_TEST_FAIL_ALLOC_AT=N (base/alloc_fail.h, test-only): the Nth
# allocation the switch counts fails as if the memory were not there.
#
# Points: the model plan's first, a middle and its last allocation (M, read
# from N=1's message "allocation 1 of the M the plan makes"), the init's
# row of ones (M+1), the first op scratch of step 1 (M+2), and the first of
# step 2 (found by bisection: the smallest N whose failure is in step 2).
# Each: 75, the buffer or op named, no "Aborted", and --out as the failure
# leaves it: gone when init failed (it did not exist before), no checkpoint
# when step 1 failed, and after a step-2 failure step 1's checkpoint
# complete, no later one, no temp file, and one trace row. Negative
# controls: N past every allocation, and the switch unset, train to the end
# with the same checkpoint and trace as each other.
source "$(dirname "$0")/run_lib.sh"
need_train

ARGS=(--steps 3 --save-at 1,3)

# at N: train with RC_TEST_FAIL_ALLOC_AT=N into $T/at_N; status in $rc
at() {
  RC_TEST_FAIL_ALLOC_AT=$1 "$RC_BIN" train "${ARGS[@]}" --out "$T/at_$1" >"$T/at_$1.out" 2>"$T/at_$1.err"
  rc=$?
}

# failed N WHAT...: 75, each WHAT in the message, the switch named, no abort
failed() {
  local n=$1
  shift
  expect_rc 75 "RC_TEST_FAIL_ALLOC_AT=$n" "at_$n"
  local w
  for w in "$@"; do contains "$T/at_$n.err" "$w"; done
  contains "$T/at_$n.err" "RC_TEST_FAIL_ALLOC_AT=$n (a test's forced failure)"
  lacks "$T/at_$n.err" "Aborted"
}

no_temps() { # no temp name (.tmp, .partial) anywhere under $1
  local left
  left=$(find "$1" -name '*.tmp*' -o -name '*.partial*' -o -name '.*.tmp' 2>/dev/null)
  [ -z "$left" ] || fail "temp files left in $1: $left"
}

at 1
failed 1 "cannot allocate" "for 'weight'" "allocation 1 of the"
M=$(grep -o 'allocation 1 of the [0-9]* the plan makes' "$T/at_1.err" | grep -o '[0-9]*' | tail -1)
[ "${M:-0}" -gt 10 ] 2>/dev/null || fail "no plan size in: $(cat "$T/at_1.err")"
M=${M:-100}
echo "the plan makes $M allocations"
for n in $((M / 2)) "$M"; do
  at "$n"
  failed "$n" "cannot allocate" "allocation $n of the $M the plan makes"
  [ -e "$T/at_$n" ] && fail "init failure at $n left --out behind: $(ls -a "$T/at_$n")"
done
at $((M + 1))
failed $((M + 1)) "for the norm weights' ones"
[ -e "$T/at_$((M + 1))" ] && fail "the ones' failure left --out behind"

n=$((M + 2))
at "$n"
failed "$n" "step 1: the cpu backend could not allocate" "bytes of scratch for"
[ -e "$T/at_$n/ckpt/iter_0000001" ] && fail "a step-1 failure saved iteration 1"
[ "$(wc -l <"$T/at_$n/trace.csv" 2>/dev/null || echo 0)" -le 1 ] || fail "a step-1 failure traced a row"

# the first allocation of step 2: the smallest N whose failure is not in
# step 1 (bisected from M+2, in step 1, and a bound past step 1's ~1000)
lo=$n hi=$((n + 8192))
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  at "$mid"
  if grep -q "step 1:" "$T/at_$mid.err"; then lo=$mid; else hi=$mid; fi
  rm -rf "$T/at_$mid" "$T/at_$mid.out" "$T/at_$mid.err"
done
echo "step 2's first op scratch is allocation $hi"
at "$hi"
failed "$hi" "step 2: the cpu backend could not allocate" "bytes of scratch for"
d="$T/at_$hi"
[ -f "$d/ckpt/iter_0000001/COMPLETE" ] || fail "step 1's checkpoint is not complete after a step-2 failure"
[ -e "$d/ckpt/iter_0000003" ] && fail "a checkpoint after the failed step 2"
[ "$(ls "$d/ckpt")" = iter_0000001 ] || fail "--out/ckpt holds more than iteration 1: $(ls -a "$d/ckpt")"
no_temps "$d"
[ "$(wc -l <"$d/trace.csv")" = 2 ] || fail "want a header and step 1 in the trace: $(cat "$d/trace.csv")"

# negative controls: past every allocation, and unset, train to the end
at 100000000
expect_rc 0 "RC_TEST_FAIL_ALLOC_AT past every allocation" at_100000000
"$RC_BIN" train "${ARGS[@]}" --out "$T/unset" >"$T/unset.out" 2>"$T/unset.err"
rc=$?
expect_rc 0 "RC_TEST_FAIL_ALLOC_AT unset" unset
for d in "$T/at_100000000" "$T/unset"; do
  [ -f "$d/ckpt/iter_0000003/COMPLETE" ] || fail "$d: no complete iteration 3"
done
a=$(cat "$T"/at_100000000/ckpt/iter_0000003/*.h5 "$T/at_100000000/trace.csv" | sha256sum)
b=$(cat "$T"/unset/ckpt/iter_0000003/*.h5 "$T/unset/trace.csv" | sha256sum)
[ "$a" = "$b" ] || fail "the switch, counting but never failing, changed the checkpoint or trace"
finish
