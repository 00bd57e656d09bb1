#!/usr/bin/env bash
# leg_step_lock.sh — `train --step-lock FILE --step-priority high|low` on the
# real CPU core (base/steplock.h). While another process holds the lock
# shared (as a high-priority leg does while it steps), a low-priority leg
# waits before its first step (timing.csv: step_lock_wait >= 2 s of a 3 s
# hold) and its trace is byte-identical to the same leg without the flag.
# Negative control: a high-priority leg under the same hold does not wait.
# A low leg runs at a lower CPU priority (nice 10), a high one does not.
# A high leg SIGKILLed while it steps does not block a low leg (control: it
# is blocked while the high leg lives); a low leg blocked on the lock ends
# at once on SIGTERM; a lock path that is a directory, a FIFO or cannot be
# opened is refused with 74 before anything is trained; bad flags are 64.
source "$(dirname "$0")/run_lib.sh"
need_train
command -v flock >/dev/null || {
  echo "skip: no flock(1) (util-linux)"
  exit 77
}

L=(--preset tiny --steps 2 --progress off)
LK="$T/step.lock"
wait_s() { grep '^step_lock_wait,,' "$1/timing.csv" | cut -d, -f3; }
# rows_of TRACE: its step rows (0 while absent)
rows_of() {
  local n
  n=$(wc -l <"$1" 2>/dev/null) || n=1
  echo $((n > 0 ? n - 1 : 0))
}
# phases: timing.csv's rows without their times and without the lock row
phases() { grep -v '^step_lock_wait,' "$1/timing.csv" | cut -d, -f1,2; }

"$RC_BIN" train "${L[@]}" --out "$T/ref" 2>"$T/ref.err" || fail "reference leg failed"
if grep -q '^step_lock_wait,' "$T/ref/timing.csv"; then fail "a leg without --step-lock has a lock row"; fi

for prio in low high; do
  hold_lock "$LK" -s 3
  held_within "$LK" -x 5 || fail "$prio: the test's holder did not take the lock"
  "$RC_BIN" train "${L[@]}" --out "$T/$prio" --step-lock "$LK" --step-priority "$prio" \
    2>"$T/$prio.err"
  rc=$?
  wait "$holder"
  [ "$rc" = 0 ] || fail "$prio: exit $rc"
  w=$(wait_s "$T/$prio")
  cmp -s "$T/ref/trace.csv" "$T/$prio/trace.csv" || fail "$prio: trace.csv differs from the leg without --step-lock"
  [ "$(phases "$T/ref")" = "$(phases "$T/$prio")" ] || fail "$prio: timing.csv's other rows changed"
  contains "$T/$prio.err" "priority $prio"
  if [ "$prio" = low ]; then
    at_least "$w" 2 || fail "low: waited '$w' s for the lock, want >= 2 (held 3 s)"
    contains "$T/low.err" "yields the GPU"
  else
    at_least "$w" 1 && fail "high: waited '$w' s under a shared hold, want < 1 (negative control)"
    [ -n "$w" ] || fail "high: no step_lock_wait row"
  fi
done

# a high leg killed while it steps frees the lock (the kernel drops the flock)
"$RC_BIN" train --preset tiny --steps 100000 --progress off --out "$T/hi" --step-lock "$LK" \
  --step-priority high 2>"$T/hi.err" &
hi=$!
for ((i = 0; i < 600 && $(rows_of "$T/hi/trace.csv") < 1; i++)); do sleep 0.1; done
[ "$(rows_of "$T/hi/trace.csv")" -ge 1 ] || fail "the high leg did not start stepping within 60 s"
held_within "$LK" -x 5 || fail "the high leg does not hold the lock while it steps"
"$RC_BIN" train "${L[@]}" --out "$T/after" --step-lock "$LK" --step-priority low 2>"$T/after.err" &
lo=$!
sleep 2
# control: while the high leg lives, the low leg has not started a step
rows=$(rows_of "$T/after/trace.csv")
[ "$rows" = 0 ] || fail "the low leg stepped ($rows rows) while a high leg held the lock"
kill -0 "$lo" 2>/dev/null || fail "the low leg ended while a high leg held the lock"
# a low leg also yields the CPU (nice 10); control: the high leg does not
ni_lo=$(ps -o ni= -p "$lo" | tr -d ' ')
ni_hi=$(ps -o ni= -p "$hi" | tr -d ' ')
[ "$ni_lo" = 10 ] || fail "the low leg runs at nice '$ni_lo', want 10"
[ "$ni_hi" = 0 ] || fail "control: the high leg runs at nice '$ni_hi', want 0"
kill -9 "$hi"
wait "$hi" 2>/dev/null
if ! ends_within 30 "$lo"; then
  fail "the low leg still waits 30 s after the high leg was killed"
  kill -9 "$lo"
fi
wait "$lo"
rc=$?
[ "$rc" = 0 ] || fail "low leg after the kill: exit $rc"
cmp -s "$T/ref/trace.csv" "$T/after/trace.csv" || fail "low leg after the kill: trace differs"

# a low leg blocked on the lock ends at once on SIGTERM (`run` stops legs so)
hold_lock "$LK" -s 60
held_within "$LK" -x 5 || fail "SIGTERM: the holder did not take the lock"
"$RC_BIN" train "${L[@]}" --out "$T/term" --step-lock "$LK" --step-priority low 2>"$T/term.err" &
lo=$!
sleep 1.5
kill -0 "$lo" 2>/dev/null || fail "SIGTERM: the low leg did not wait for the lock"
kill -TERM "$lo"
if ! ends_within 5 "$lo"; then
  fail "SIGTERM: a low leg blocked on the lock still runs 5 s later"
  kill -9 "$lo"
fi
wait "$lo"
rc=$?
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, want 143"
kill "$holder"
wait "$holder" 2>/dev/null

# bad lock paths: 74, clear message, nothing trained (no --out created)
D=$(mktemp -d "$T/bad.XXXXXX")
mkdir "$D/dir"
mkfifo "$D/fifo"
for what in dir fifo missing/x; do
  out="$T/bad_${what%%/*}"
  timeout 30 "$RC_BIN" train "${L[@]}" --out "$out" --step-lock "$D/$what" 2>"$T/bad.err"
  rc=$?
  [ "$rc" = 74 ] || fail "--step-lock $what: exit $rc, want 74"
  contains "$T/bad.err" "--step-lock $D/$what"
  [ -e "$out" ] && fail "--step-lock $what: --out was created"
done
contains "$T/bad.err" "cannot open"
timeout 30 "$RC_BIN" train "${L[@]}" --out "$T/bad_d" --step-lock "$D/dir" 2>"$T/bad.err"
contains "$T/bad.err" "a directory, not a regular file"
timeout 30 "$RC_BIN" train "${L[@]}" --out "$T/bad_f" --step-lock "$D/fifo" 2>"$T/bad.err"
contains "$T/bad.err" "a FIFO, not a regular file"
# control: a regular file there is fine
timeout 60 "$RC_BIN" train "${L[@]}" --out "$T/good" --step-lock "$D/ok.lock" 2>"$T/good.err" ||
  fail "--step-lock on a new regular file failed"

# usage errors
for args in "--step-priority low" "--step-lock $LK --step-priority mid" "--step-lock" \
  "--step-lock $LK --step-lock $LK"; do
  # shellcheck disable=SC2086
  "$RC_BIN" train "${L[@]}" --out "$T/usage" $args 2>"$T/usage.err"
  rc=$?
  [ "$rc" = 64 ] || fail "train $args: exit $rc, want 64"
done
[ -e "$T/usage" ] && fail "a usage error created --out"
finish
