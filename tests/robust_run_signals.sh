#!/usr/bin/env bash
# robust_run_signals.sh — `resumecheck run` with the real `train` legs:
#   - SIGTERM, then (separately) SIGINT, once a leg has trained a step: every
#     leg process is gone afterwards (the process table holds nothing with
#     this test's scratch path), the exit status is 143 / 130, report.json
#     says "interrupted" with that exit code and, per leg, what it had
#     finished; the text report says INTERRUPTED;
#   - a leg that dies on its own (SIGKILL from the RC_TEST_CRASH_AT_WRITE
#     hook during its first save) is reported with its signal and log tail,
#     exit 70, and nothing is left running.
# Negative control: the same run, uninterrupted, exits 0 with verdict
# "identical" (so the checks above see the signal's effect, not a broken run).
source "$(dirname "$0")/run_lib.sh"

MODEL=(--hidden 16 --ffn 32 --vocab 64 --seq-len 16)

# negative control: short, uninterrupted
run_rc ok "${MODEL[@]}" --steps 4 --save-at 2 --out "$T/ok" --progress off
expect_rc 0 "uninterrupted run" ok
json_true "$T/ok/report.json" "d['verdict'] == 'identical' and not d['interrupted']" "uninterrupted report"

no_orphans() { # WHAT DIR
  local left=""
  for _ in $(seq 50); do # the legs were reaped before run exited; allow ps a moment
    left=$(ps -eo pid,args | grep -F -- "$2" | grep -v grep)
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "$1: leg processes still running: $left"
}

interrupt() { # SIG WANT_RC NAME
  local sig=$1 want=$2 name=$3 out="$T/$3"
  "$RC_BIN" run "${MODEL[@]}" --steps 3000 --save-at 1500 --aa --out "$out" --progress off \
    >"$T/$name.out" 2>"$T/$name.err" &
  local pid=$!
  for _ in $(seq 600); do # up to a minute for the first trace row
    [ -f "$out/through/trace.csv" ] && [ "$(wc -l <"$out/through/trace.csv")" -ge 3 ] && break
    sleep 0.1
  done
  # the legs run now: their pids, to check each one is gone
  local legs
  legs=$(ps -eo pid,args | grep -F -- "$out/" | grep -v grep | awk '{print $1}')
  [ -n "$legs" ] || fail "$name: no leg process seen before the signal"
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
  expect_rc "$want" "run interrupted by SIG$sig" "$name"
  for p in $legs; do
    if kill -0 "$p" 2>/dev/null && ps -o args= -p "$p" | grep -qF -- "$out/"; then
      fail "$name: leg pid $p survived SIG$sig"
    fi
  done
  no_orphans "$name" "$out/"
  json_true "$out/report.json" "d['verdict'] == 'interrupted' and d['interrupted'] and d['exit_code'] == $want" "$name: report says interrupted, exit $want"
  json_true "$out/report.json" "all(l['status'] in ('killed', 'skipped') for l in d['legs'])" "$name: every leg stopped or never started"
  json_true "$out/report.json" "any(l['status'] == 'killed' and 'interrupted by SIG$sig' in l['reason'] and 'it had finished' in l['reason'] for l in d['legs'])" "$name: killed legs say by what and how far they got"
  contains "$T/$name.out" "INTERRUPTED"
}
interrupt TERM 143 term
interrupt INT 130 int

# a leg that dies on its own: SIGKILL at the first write step of its first save
RC_TEST_CRASH_AT_WRITE=1 run_rc dies "${MODEL[@]}" --steps 4 --save-at 2 --out "$T/dies" --progress off
expect_rc 70 "a leg killed by SIGKILL" dies
json_true "$T/dies/report.json" "d['verdict'] == 'leg-failed'" "report: leg-failed"
json_true "$T/dies/report.json" "any(l['status'] == 'failed' and l['signal'] == 9 and 'signal 9' in l['reason'] and 'RC_TEST_CRASH_AT_WRITE=1: SIGKILL' in (l['log_tail'] or '') for l in d['legs'])" "report: signal 9 and the log tail"
contains "$T/dies.out" "signal 9"
no_orphans dies "$T/dies/"
finish
