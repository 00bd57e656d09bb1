#!/usr/bin/env bash
# run_prewarm_dies.sh — the producer of a pre-warmed leg's checkpoint dies
# (RC_TEST_KILL_BEFORE_SAVE=save: SIGKILL just before its save) while
# resume@5 waits for it. The wait must end promptly: `run` closes the
# leg's wait pipe, the leg ends ("stopped waiting"), `run` exits 70. With
# --keep-going nothing else would stop the waiting leg, so that is the
# case that proves it; `timeout` turns a hang into a failure. Negative
# control: with RC_TEST_KEEP_WAIT_PIPES=1 (run keeps the pipe open) the
# same run does not end by itself.
source "$(dirname "$0")/run_lib.sh"
need_train
command -v timeout >/dev/null || { echo "skip: no timeout(1)"; exit 77; }

A=(--preset tiny --steps 10 --save-at 5 --jobs 3 --progress plain)
for mode in keep-going stop; do
  extra=()
  [ "$mode" = keep-going ] && extra=(--keep-going)
  RC_TEST_KILL_BEFORE_SAVE=save timeout 60 "$RC_BIN" run "${A[@]}" --out "$T/$mode" "${extra[@]}" \
    >"$T/$mode.out" 2>"$T/$mode.err"
  rc=$?
  expect_rc 70 "producer killed ($mode)" "$mode"
  R="$T/$mode/report.json"
  json_true "$R" "[l for l in d['legs'] if l['label'] == 'save'][0]['signal'] == 9" "$mode: save died by SIGKILL"
  json_true "$R" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['status'] == 'killed'" "$mode: resume@5 ended"
  json_true "$R" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['prewarmed'] is True" "$mode: resume@5 was pre-warmed"
  # the bound: the waiting leg ends within 10 s of its producer
  json_true "$R" "(lambda L: L['resume@5']['wall_s'] - L['save']['wall_s'] < 10)({l['label']: l for l in d['legs']})" "$mode: resume@5 ended within 10 s of save"
  [ -e "$T/$mode/resume@5/trace.csv" ] && fail "$mode: the waiting leg trained"
done
contains "$T/keep-going.out" "stopped waiting: it needs the checkpoint of save at step 5, and save failed"
contains "$T/keep-going/resume@5/log.txt" "will not come"

# negative control: without the pipe being closed the wait does not end
RC_TEST_KEEP_WAIT_PIPES=1 RC_TEST_KILL_BEFORE_SAVE=save timeout 15 "$RC_BIN" run "${A[@]}" \
  --out "$T/hang" --keep-going >"$T/hang.out" 2>"$T/hang.err"
rc=$?
[ "$rc" = 124 ] || fail "negative control: with the pipe kept open the run ended by itself (exit $rc)"
finish
