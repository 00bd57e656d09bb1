#!/usr/bin/env bash
# robust_deferred_note.sh — the deferred save's note going missing
# (--through-checkpoints on-demand, docs/robustness.md "A deferred save
# never waits for ever"), on the real CPU core. Asserted, each under
# `timeout` so that a hang fails instead of blocking CI:
#   1. the leg alone: `train --save-deferred-at` with a decision pipe whose
#      writer never answers; its ITER.deferred.json removed while it waits
#      ends the leg with 65 within seconds, naming the note; the save kept
#      hashes only. Control: RC_TEST_DEFERRED_BLOCKING=1 (one blocking
#      read, as before) is still waiting when `timeout` ends it (124).
#   2. `run --through-checkpoints on-demand`: the through leg's note removed
#      while the save leg is held (RC_TEST_HANDOFF=delay) ends the run with
#      70, the through leg failed with its reason. Controls: the same run
#      without the removal ends 0 with through@N kept as hashes; with
#      RC_TEST_DEFERRED_BLOCKING=1 the run is still running when `timeout`
#      ends it (124).
source "$(dirname "$0")/run_lib.sh"
need_train

NOTE=ckpt/iter_0000003.deferred.json
# removes FILE as soon as it exists (up to 60 s), in the background
remove_when_there() {
  (for _ in $(seq 3000); do
    if [ -e "$1" ]; then
      rm -f "$1"
      exit 0
    fi
    sleep 0.02
  done) &
  remover=$!
}

# ---- 1. the leg alone: fd 3 is a pipe whose writer (sleep) never writes
leg_alone() { # NAME [ENV...]: sets rc, elapsed seconds in $secs
  local name=$1
  shift
  remove_when_there "$T/$name/$NOTE"
  local t0=$SECONDS
  exec 3< <(exec sleep 60 2>/dev/null)
  local writer=$!
  env "$@" RC_DECIDE_FD=3 timeout 8 "$RC_BIN" train --preset tiny --steps 3 --save-at 3 \
    --save-deferred-at 3 --out "$T/$name" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
  secs=$((SECONDS - t0))
  exec 3<&-
  kill "$writer" 2>/dev/null
  wait "$remover" 2>/dev/null
}
leg_alone alone
[ "$rc" = 65 ] || fail "leg alone, note removed: exit $rc, want 65: $(tail -3 "$T/alone.err")"
[ "$secs" -le 10 ] || fail "leg alone: took $secs s to notice the note was gone"
contains "$T/alone.err" "iter_0000003.deferred.json, and that note was removed or replaced"
json_true "$T/alone/ckpt/iter_0000003/manifest.json" "d['hashes_only'] is True" "leg alone: the save kept hashes only"
# control: the old blocking read never notices
leg_alone blocking RC_TEST_DEFERRED_BLOCKING=1
[ "$rc" = 124 ] || fail "control: with the blocking read the leg should wait until timeout (124), got $rc"

# ---- 2. through run
SEED=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --steps 6 --save-at 3
  --first-microbatch-policy resolve --progress off --jobs 3 --through-checkpoints on-demand)
NOTE6=through/ckpt/iter_0000006.deferred.json
# the save leg is held 4 s after it hands its checkpoint over, so resume@3
# reaches 6 late and the through leg waits for run's word meanwhile
export RC_TEST_HANDOFF=delay:4000
remove_when_there "$T/r/$NOTE6"
t0=$SECONDS
timeout 60 "$RC_BIN" run "${SEED[@]}" --out "$T/r" >"$T/r.out" 2>"$T/r.err"
rc=$?
wait "$remover" 2>/dev/null
[ "$rc" = 70 ] || fail "run, note removed: exit $rc, want 70: $(tail -5 "$T/r.out")"
[ $((SECONDS - t0)) -le 40 ] || fail "run, note removed: took $((SECONDS - t0)) s"
json_true "$T/r/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['status'] == 'failed'" "run: through failed"
json_true "$T/r/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['exit_code'] == 65" "run: through exited 65"
grep -qE "that note was removed or replaced|run saw that note vanish" "$T/r/through/log.txt" ||
  fail "run: the through leg's log does not say its note went"

# control: the same run, nothing removed
run_rc keep "${SEED[@]}" --out "$T/k"
expect_rc 0 "control: the same run without the removal" keep
json_true "$T/k/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['kept'] == 'hashes'" "control: through@6 kept as hashes"

# control: the old protocol hangs on the same removal
remove_when_there "$T/b/$NOTE6"
RC_TEST_DEFERRED_BLOCKING=1 timeout 12 "$RC_BIN" run "${SEED[@]}" --out "$T/b" >"$T/b.out" 2>"$T/b.err"
rc=$?
wait "$remover" 2>/dev/null
[ "$rc" = 124 ] || fail "control: with the old protocol the run should hang until timeout (124), got $rc"
unset RC_TEST_HANDOFF
finish
