#!/usr/bin/env bash
# leg_start_gate.sh — `train --start-gate FILE` on the real CPU core
# (base/steplock.h, rc_start_gate_wait). While another process holds FILE
# exclusively (as `run` does while its critical legs set up), the leg waits
# before its backend: no timing.csv and no trace row while held; once the
# holder is gone it trains, its timing.csv has a start_gate row of at least
# the time held, and its trace is byte-identical to the same leg without the
# flag. Negative control: the same leg with nobody holding the gate passes at
# once (it finishes while no holder exists). A holder SIGKILLed frees the
# gate (the kernel drops the flock: a gate never outlives `run`); a leg
# waiting at the gate ends at once on SIGTERM; a gate path that is a
# directory or a FIFO is 74 before anything is trained; an empty one is 64.
source "$(dirname "$0")/run_lib.sh"
need_train
command -v flock >/dev/null || {
  echo "skip: no flock(1) (util-linux)"
  exit 77
}

L=(--preset tiny --steps 2 --progress off)
G="$T/start.gate"
gate_s() { grep '^start_gate,,' "$1/timing.csv" | cut -d, -f3; }
"$RC_BIN" train "${L[@]}" --out "$T/ref" 2>"$T/ref.err" || fail "reference leg failed"
if grep -q '^start_gate,' "$T/ref/timing.csv"; then fail "a leg without --start-gate has a gate row"; fi

# negative control: nobody holds the gate, the leg passes it at once
"$RC_BIN" train "${L[@]}" --out "$T/open" --start-gate "$G" 2>"$T/open.err" || fail "open gate: exit $?"
[ -n "$(gate_s "$T/open")" ] || fail "open gate: no start_gate row"
at_least "$(gate_s "$T/open")" 2 && fail "open gate: waited $(gate_s "$T/open") s with nobody holding it"
cmp -s "$T/ref/trace.csv" "$T/open/trace.csv" || fail "open gate: trace differs"

# held: the leg waits before its backend, then trains the same bits
hold_lock "$G" -x 60
held_within "$G" -s 5 || fail "the test's holder did not take the gate"
"$RC_BIN" train "${L[@]}" --out "$T/held" --start-gate "$G" 2>"$T/held.err" &
leg=$!
sleep 2.5
kill -0 "$leg" 2>/dev/null || fail "the leg ended while the gate was held"
[ -e "$T/held/timing.csv" ] && fail "the leg set up (timing.csv exists) while the gate was held"
[ -e "$T/held/trace.csv" ] && fail "the leg trained (trace.csv exists) while the gate was held"
# the holder SIGKILLed: the kernel drops its flock and the leg goes on
kill -9 "$holder"
wait "$holder" 2>/dev/null
if ! ends_within 60 "$leg"; then
  fail "the leg still waits 60 s after the gate's holder was killed"
  kill -9 "$leg"
fi
wait "$leg"
rc=$?
[ "$rc" = 0 ] || fail "held gate: exit $rc"
at_least "$(gate_s "$T/held")" 2 || fail "held gate: start_gate row '$(gate_s "$T/held")', want >= 2 s of a 2.5 s hold"
cmp -s "$T/ref/trace.csv" "$T/held/trace.csv" || fail "held gate: trace differs from the leg without it"

# SIGTERM while waiting at the gate ends the leg at once (`run` stops legs so)
hold_lock "$G" -x 60
held_within "$G" -s 5 || fail "SIGTERM: the holder did not take the gate"
"$RC_BIN" train "${L[@]}" --out "$T/term" --start-gate "$G" 2>"$T/term.err" &
leg=$!
sleep 1.5
kill -0 "$leg" 2>/dev/null || fail "SIGTERM: the leg did not wait at the gate"
kill -TERM "$leg"
if ! ends_within 5 "$leg"; then
  fail "SIGTERM: a leg waiting at the gate still runs 5 s later"
  kill -9 "$leg"
fi
wait "$leg"
rc=$?
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, want 143"
kill "$holder"
wait "$holder" 2>/dev/null

# bad gate paths: 74 with the reason, nothing trained; empty: 64
D=$(mktemp -d "$T/bad.XXXXXX")
mkdir "$D/dir"
mkfifo "$D/fifo"
for what in dir fifo; do
  timeout 30 "$RC_BIN" train "${L[@]}" --out "$T/bad_$what" --start-gate "$D/$what" 2>"$T/bad.err"
  rc=$?
  [ "$rc" = 74 ] || fail "--start-gate $what: exit $rc, want 74"
  contains "$T/bad.err" "--start-gate $D/$what"
  contains "$T/bad.err" "nothing was trained"
  [ -e "$T/bad_$what/trace.csv" ] && fail "--start-gate $what: trained anyway"
done
"$RC_BIN" train "${L[@]}" --out "$T/bad_empty" --start-gate "" 2>"$T/bad.err"
[ "$?" = 64 ] || fail "--start-gate '': want 64"
contains "$T/bad.err" "--start-gate: empty path"
finish
