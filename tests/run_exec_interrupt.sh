#!/usr/bin/env bash
# run_exec_interrupt.sh — SIGINT stops every leg (and what its trainer
# started), the run still writes its report, exit 130. No timing is
# asserted: the signal is sent once a leg has shown progress.
source "$(dirname "$0")/run_lib.sh"

"$RC_BIN" run --trainer exec --train-cmd "$(tmpl --bug slow)" --steps 200 --save-at 100 \
  --out "$T/i" --progress off >"$T/i.out" 2>"$T/i.err" &
pid=$!
for _ in $(seq 600); do # up to a minute for the first trace row to appear
  [ "$(wc -l <"$T/i/through/trace.csv" 2>/dev/null || echo 0)" -ge 2 ] && break
  sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
expect_rc 130 "interrupted run" i
json_true "$T/i/report.json" "d['verdict'] == 'interrupted' and d['interrupted'] and d['exit_code'] == 130" "report says interrupted"
json_true "$T/i/report.json" "all(l['status'] in ('killed', 'skipped') for l in d['legs'])" "every leg stopped or never started"
# no trainer of this run is left (their command lines hold our scratch path)
sleep 0.5
left=$(ps -eo pid,args | grep -F -- "$T/i" | grep -v grep)
[ -z "$left" ] || fail "legs still running: $left"
finish
