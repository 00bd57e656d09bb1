#!/usr/bin/env bash
# bisect_usage.sh — bisect's inputs: no RUN_DIR or an unknown flag is a usage
# error (64), a directory without report.json is missing input (66), a report
# that is not JSON or not a run report is bad data (65); --git-bisect turns
# all of these into 125. Negative control: --help exits 0.
. "$(dirname "$0")/bisect_lib.sh"

try() { # WANT ARGS...
  local want=$1
  shift
  "$RC_BIN" bisect "$@" >"$T/out.txt" 2>&1
  local r=$?
  [ "$r" = "$want" ] || { fail "bisect $*: exit $r, want $want"; sed 's/^/  | /' "$T/out.txt" >&2; }
}
mkdir -p "$T/empty" "$T/garbage" "$T/other"
printf '{"schema": "resumecheck.run-report", "verdict": ' >"$T/garbage/report.json"
printf '{"schema": "something-else", "verdict": "identical", "exit_code": 0}\n' >"$T/other/report.json"
try 64
try 64 "$T/empty" --frobnicate
try 64 "$T/empty" "$T/other"
try 64 "$T/empty" --context 0
try 66 "$T/empty"
try 66 "$T/does-not-exist"
try 65 "$T/garbage"
try 65 "$T/other"
try 125 "$T/empty" --git-bisect
try 125 "$T/garbage" --git-bisect
# negative control
try 0 --help
grep -q "git-bisect" "$T/out.txt" || fail "--help does not mention --git-bisect"
finish
