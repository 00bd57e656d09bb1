#!/usr/bin/env bash
# hostile_legs.sh — legs treated carelessly (issue 16, items 3-5), on the
# real CPU core and the fake exec trainer:
#  1. `train` into an --out that holds a complete checkpoint it would save
#     refuses (74) before writing anything: trace.csv and timing.csv keep
#     their bytes and times. Control: the same snapshot sees a train that
#     does write.
#  2. two `train` into one --out: the second is refused (64) naming the
#     first (pid), the first is unharmed. Control: `flock -n` cannot take
#     the lock meanwhile; once the first ended the second succeeds.
#  3. SIGKILL of `run`: its legs die with it (self legs and an exec
#     trainer's whole process group) within 5 s. Control:
#     RC_TEST_LEGS_OUTLIVE_RUN=1 (no supervisor kill) leaves them running,
#     and a new `run --overwrite` then refuses (64) the directory a leg still
#     holds, naming it.
source "$(dirname "$0")/run_lib.sh"
need_train

snapshot() { (cd "$1" && find . -path ./.lock -prune -o -type f -printf '%p %s %T@\n' | sort && cat trace.csv timing.csv) >"$2"; }
rows_of() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# ---- 1. refuse before writing
O="$T/one"
"$RC_BIN" train --steps 4 --save-at 2 --out "$O" 2>"$T/1a.err" || fail "first train failed"
snapshot "$O" "$T/before"
sleep 0.05
"$RC_BIN" train --steps 4 --save-at 2 --out "$O" 2>"$T/1b.err"
rc=$?
[ "$rc" = 74 ] || fail "train into a complete checkpoint: exit $rc, want 74"
contains "$T/1b.err" "refusing to overwrite the complete checkpoint $O/ckpt/iter_0000002 (nothing was written"
snapshot "$O" "$T/after"
cmp -s "$T/before" "$T/after" || fail "the refused train touched the leg directory"
# control: a train that writes (no checkpoint in its way) is seen by the same snapshot
"$RC_BIN" train --steps 4 --save-at 3 --out "$O" 2>/dev/null || fail "control train failed"
snapshot "$O" "$T/after2"
cmp -s "$T/before" "$T/after2" && fail "negative control: the snapshot did not see a train that wrote"

# ---- 2. one train per --out
O="$T/two"
"$RC_BIN" train --steps 400 --save-at 200 --out "$O" >/dev/null 2>"$T/2a.err" &
apid=$!
for _ in $(seq 300); do [ "$(rows_of "$O/trace.csv")" -ge 2 ] && break; sleep 0.1; done
[ "$(rows_of "$O/trace.csv")" -ge 2 ] || fail "the first train never started"
"$RC_BIN" train --steps 4 --save-at 2 --seed 7 --out "$O" 2>"$T/2b.err"
rc=$?
[ "$rc" = 64 ] || fail "second train into a busy --out: exit $rc, want 64"
contains "$T/2b.err" "another \`resumecheck train\` (pid $apid) is using $O"
[ -e "$O/ckpt/iter_0000002" ] && fail "the refused train wrote a checkpoint"
if command -v flock >/dev/null; then
  flock -n "$O/.lock" true && fail "flock -n took the lock while the first train holds it"
fi
kill -0 "$apid" 2>/dev/null || fail "the first train died"
kill -TERM "$apid"
wait "$apid"
"$RC_BIN" train --steps 4 --save-at 2 --seed 7 --out "$O" 2>"$T/2c.err" ||
  fail "negative control: train after the first ended was refused: $(cat "$T/2c.err")"

# ---- 3. legs die with run
kill_run_midway() { # NAME ARGS...: starts run, waits for through to train, SIGKILLs it
  local name=$1
  shift
  "$RC_BIN" run "$@" --out "$T/$name" --progress off --jobs 4 >"$T/$name.out" 2>"$T/$name.err" &
  local rpid=$!
  for _ in $(seq 300); do [ "$(rows_of "$T/$name/through/trace.csv")" -ge 2 ] && break; sleep 0.1; done
  [ "$(rows_of "$T/$name/through/trace.csv")" -ge 2 ] || fail "$name: the legs never started"
  kill -KILL "$rpid"
  wait "$rpid" 2>/dev/null
}
SELF=(--preset tiny --steps 400 --save-at 200)
EXEC=(--trainer exec --train-cmd "$(tmpl --bug slow)" --steps 400 --save-at 200)
kill_run_midway self "${SELF[@]}"
gone_within "$T/self/" 5 || fail "self legs outlived run by 5 s: $(procs_in "$T/self/")"
kill_run_midway exec "${EXEC[@]}"
gone_within "$T/exec/" 5 || fail "exec legs outlived run by 5 s: $(procs_in "$T/exec/")"
# and a new run can take the directory over
run_rc self2 --preset tiny --steps 6 --save-at 3 --out "$T/self" --overwrite --progress off
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "run --overwrite after the legs died: exit $rc"

# control: legs that outlive run are found, and a new run refuses their directory
export RC_TEST_LEGS_OUTLIVE_RUN=1
kill_run_midway orphan "${SELF[@]}"
sleep 1
left=$(procs_in "$T/orphan/")
[ -n "$left" ] || fail "negative control: without the supervisor's kill no leg outlived run"
unset RC_TEST_LEGS_OUTLIVE_RUN
run_rc orphan2 --preset tiny --steps 6 --save-at 3 --out "$T/orphan" --overwrite --progress off
expect_rc 64 "run --overwrite over a leg still running" orphan2
contains "$T/orphan2.err" "is still in use by \`resumecheck train\` (pid"
for p in $left; do kill -KILL "$p" 2>/dev/null; done
gone_within "$T/orphan/" 5 || fail "could not clean up the orphaned legs"
finish
