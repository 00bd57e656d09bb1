#!/usr/bin/env bash
# hostile_legs_limits.sh — exec trainers that would never end, or would fill
# the disk with their log (issue 16, weak items), on the fake exec trainer
# wrapped by small hostile scripts. Every `run` is under `timeout`, so a
# regression fails here rather than hangs.
#  1. --leg-timeout: values other than a positive number are refused (64).
#  2. a trainer that hangs (and whose child hangs too): with --leg-timeout 1
#     every leg fails as timed-out, exit 70, "timed out after 1 s" in the
#     text report, report.json and JUnit, nothing of it left running.
#     Control: without --leg-timeout the same run is still running when
#     `timeout 6` ends it (124).
#  3. a trainer that ignores SIGTERM, after printing 3 MiB: SIGKILL after
#     the grace, and its log still has its head, the marker and its last line.
#  4. a trainer that prints 50 MiB: its log is exactly the first 1 MiB, one
#     marker line and the last 1 MiB (from its first line to its last), and
#     the run passes. Control: RC_TEST_LEG_LOG_UNCAPPED=1 (the log written
#     by the trainer itself, as before the cap) lets the log grow past 50 MiB.
#  5. a well-behaved run with --leg-timeout 120 is identical (exit 0).
source "$(dirname "$0")/run_lib.sh"

HEAD=$((1 << 20)) TAIL=$((1 << 20)) # RC_LEG_LOG_HEAD / RC_LEG_LOG_TAIL (harness/run.h)
BIG=$((50 << 20))
FAKE_ARGS="--steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"

# the hostile trainers: each wraps the fake trainer or never gets to it
cat >"$T/hang.sh" <<'EOF'
echo "hang: leg $RC_LEG starts and never ends"
sleep 1000 &
wait
EOF
cat >"$T/deaf.sh" <<'EOF'
trap '' TERM
echo "deaf: FIRST-LINE"
yes 'deaf: a line of output that nobody will read' | head -n 65536
echo "deaf: LAST-LINE"
while :; do sleep 0.1; done
EOF
# chatty: only the through leg prints, BIG bytes of whole lines between its first and last
LINE='chatty: 64 bytes a line, and there are a great many of them....'
LINES=$((BIG / (${#LINE} + 1)))
[ $((LINES * (${#LINE} + 1))) = "$BIG" ] || fail "test setup: LINE is not a divisor of BIG"
cat >"$T/chatty.sh" <<'EOF'
if [ "$RC_LEG" = through ]; then
  echo "chatty: FIRST-LINE"
  yes "$LINE" | head -n "$LINES"
fi
bash "$FAKE" "$@" >/dev/null 2>&1
rc=$?
[ "$RC_LEG" = through ] && echo "chatty: LAST-LINE"
exit $rc
EOF
echo 'exec bash "$FAKE" "$@"' >"$T/plain.sh"
export LINE LINES FAKE
exec_run() { # NAME TIMEOUT SCRIPT ARGS...: `timeout TIMEOUT resumecheck run` with SCRIPT as the trainer
  local name=$1 limit=$2 script=$3
  shift 3
  timeout "$limit" "$RC_BIN" run --trainer exec --train-cmd "bash $T/$script $FAKE_ARGS" \
    --out "$T/$name" --progress off "$@" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
}
# waits up to 5 s for no process to mention $1
none_left() {
  local i
  for i in $(seq 50); do
    ps -eo args | grep -F -- "$1" | grep -vq grep || return 0
    sleep 0.1
  done
  fail "processes of $1 left: $(ps -eo pid,args | grep -F -- "$1" | grep -v grep)"
}

# ---- 1. usage
for bad in 0 -1 0.0 abc 1e3 inf nan 0x10 "" 1.5.2 " 3"; do
  run_rc bad --trainer exec --train-cmd "bash $T/hang.sh" --steps 4 --save-at 2 --out "$T/bad" \
    --leg-timeout "$bad"
  expect_rc 64 "--leg-timeout '$bad'" bad
  contains "$T/bad.err" "--leg-timeout: '$bad' is not a positive number of seconds"
done
[ -e "$T/bad" ] && fail "a refused --leg-timeout left $T/bad"
"$RC_BIN" run --help | grep -q -- "--leg-timeout S" || fail "run --help does not document --leg-timeout"

# ---- 2. a trainer that hangs
exec_run hang 60 hang.sh --steps 4 --save-at 2 --leg-timeout 1 --keep-going --jobs 2 --junit "$T/hang.xml"
expect_rc 70 "hanging trainer with --leg-timeout 1" hang
contains "$T/hang.out" "timed-out: timed out after 1 s (--leg-timeout)"
contains "$T/hang.out" "verdict: LEG FAILED"
json_true "$T/hang/report.json" "d['exit_code'] == 70 and d['verdict'] == 'leg-failed' and d['config']['leg_timeout_s'] == 1" "report: leg-failed, exit 70, the bound"
json_true "$T/hang/report.json" "[l['status'] for l in d['legs']] == ['timed-out', 'timed-out', 'skipped']" "report: through and save timed out, resume skipped"
json_true "$T/hang/report.json" "all(l['reason'].startswith('timed out after 1 s') for l in d['legs'][:2])" "report: the reasons say timed out"
json_true "$T/hang/report.json" "'and save timed out' in d['legs'][2]['reason']" "report: resume was not started because save timed out"
contains "$T/hang.xml" 'type="leg-timed-out"'
xml_ok "$T/hang.xml" "the JUnit report of a timed-out run"
none_left "$T/hang/"
# control: without the bound the same run hangs until `timeout` ends it
exec_run nobound 6 hang.sh --steps 4 --save-at 2
[ "$rc" = 124 ] || fail "negative control: without --leg-timeout the hanging trainer's run ended by itself (exit $rc)"
none_left "$T/nobound/"

# ---- 3. a trainer deaf to SIGTERM: killed after the grace, its log keeps head and tail
exec_run deaf 60 deaf.sh --steps 4 --save-at 2 --leg-timeout 1 --jobs 1
expect_rc 70 "trainer that ignores SIGTERM" deaf
json_true "$T/deaf/report.json" "d['legs'][0]['status'] == 'timed-out' and d['legs'][0]['signal'] == 9" "report: through timed out and was SIGKILLed"
L="$T/deaf/through/log.txt"
sed -n 2p "$L" | grep -qx "deaf: FIRST-LINE" || fail "deaf: the log does not start with the trainer's first line"
tail -n 1 "$L" | grep -qx "deaf: LAST-LINE" || fail "deaf: the log does not end with the trainer's last line: $(tail -c 200 "$L")"
grep -q "^\[resumecheck: [0-9]* bytes of this leg's output dropped here" "$L" || fail "deaf: no marker line"
[ "$(stat -c %s "$L")" -le $((HEAD + TAIL + 4096)) ] || fail "deaf: log of $(stat -c %s "$L") bytes"
none_left "$T/deaf/"

# ---- 4. a trainer that prints 50 MiB
exec_run chatty 120 chatty.sh --steps 4 --save-at 2
expect_rc 0 "chatty trainer" chatty
L="$T/chatty/through/log.txt"
size=$(stat -c %s "$L")
[ "$size" -le $((HEAD + TAIL + 4096)) ] || fail "chatty: log of $size bytes, cap $((HEAD + TAIL)) + the marker"
if have_py; then
  # exactly: the command line, the first HEAD bytes, the marker, the last
  # TAIL bytes from the first whole line on
  python3 - "$L" "$BIG" "$HEAD" "$TAIL" <<'PY' || fail "chatty: the log is not head + marker + tail of the output"
import os, sys
path, big, head, tail = sys.argv[1], *map(int, sys.argv[2:])
line = os.environ["LINE"].encode() + b"\n"
out = b"chatty: FIRST-LINE\n" + line * (big // len(line)) + b"chatty: LAST-LINE\n"
t = out[-tail:]
t = t[t.index(b"\n") + 1:] if out[-tail - 1:-tail] != b"\n" else t
dropped = len(out) - head - len(t)
sep = b"" if out[head - 1:head] == b"\n" else b"\n"
marker = (b"[resumecheck: %d bytes of this leg's output dropped here; the log keeps the first %d"
          b" and the last %d bytes]\n" % (dropped, head, tail))
log = open(path, "rb").read()
body = log[log.index(b"\n") + 1:]  # after the "$ command" line
want = out[:head] + sep + marker + t
if body != want:
    print("log body %d bytes, want %d" % (len(body), len(want)), file=sys.stderr)
    sys.exit(1)
PY
fi
sed -n 2p "$L" | grep -qx "chatty: FIRST-LINE" || fail "chatty: the log does not start with the first line"
tail -n 1 "$L" | grep -qx "chatty: LAST-LINE" || fail "chatty: the log does not end with the last line"
# control: the log as the trainer wrote it before the cap
RC_TEST_LEG_LOG_UNCAPPED=1 exec_run uncapped 120 chatty.sh --steps 4 --save-at 2
expect_rc 0 "chatty trainer, uncapped" uncapped
size=$(stat -c %s "$T/uncapped/through/log.txt")
[ "$size" -gt "$BIG" ] || fail "negative control: the uncapped log has $size bytes, not more than $BIG"
lacks "$T/uncapped/through/log.txt" "bytes of this leg's output dropped here"
rm -rf "$T/uncapped" "$T/chatty"

# ---- 5. a bound that is not reached changes nothing
exec_run calm 60 plain.sh --steps 4 --save-at 2 --leg-timeout 120
expect_rc 0 "a run within --leg-timeout" calm
lacks "$T/calm.out" "timed out"
finish
