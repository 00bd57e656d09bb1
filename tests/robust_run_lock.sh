#!/usr/bin/env bash
# robust_run_lock.sh — one run per output directory. While a run holds
# DIR/.lock (flock), a second `run` into DIR is refused with exit 64 and a
# message naming the holder's pid, with or without --overwrite, and the first
# run's files are left alone. Negative controls: the lock is a real flock
# (`flock -n` cannot take it while the first run lives), and once the first
# run has ended, `run --overwrite` into DIR succeeds.
source "$(dirname "$0")/run_lib.sh"

D="$T/shared out"
"$RC_BIN" run --trainer exec --train-cmd "$(tmpl --bug slow)" --steps 400 --save-at 200 \
  --out "$D" --progress off >"$T/a.out" 2>"$T/a.err" &
apid=$!
for _ in $(seq 600); do # up to a minute for the first trace row
  [ -f "$D/through/trace.csv" ] && [ "$(wc -l <"$D/through/trace.csv")" -ge 2 ] && break
  sleep 0.1
done
[ -f "$D/through/trace.csv" ] || fail "the first run never started its legs"
ino=$(stat -c %i "$D/through/trace.csv")

if command -v flock >/dev/null; then
  flock -n "$D/.lock" true && fail "flock -n took DIR/.lock while the first run holds it"
fi
for mode in plain overwrite; do
  extra=()
  [ "$mode" = overwrite ] && extra=(--overwrite)
  run_rc "b_$mode" --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$D" \
    --progress off "${extra[@]}"
  expect_rc 64 "second run into a busy directory ($mode)" "b_$mode"
  contains "$T/b_$mode.err" "another \`resumecheck run\` (pid $apid) is using"
done
kill -0 "$apid" 2>/dev/null || fail "the first run died while the second was refused"
[ "$(stat -c %i "$D/through/trace.csv" 2>/dev/null)" = "$ino" ] || fail "the first run's files were touched"

kill -INT "$apid"
wait "$apid"
rc=$?
expect_rc 130 "first run, interrupted" a
if command -v flock >/dev/null; then
  flock -n "$D/.lock" true || fail "DIR/.lock still held after the first run ended"
fi
# negative control: with the first run gone, --overwrite replaces it
run_rc c --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$D" --progress off --overwrite
expect_rc 0 "run --overwrite after the first run ended" c
json_true "$D/report.json" "d['verdict'] == 'identical'" "the second run's report"
finish
