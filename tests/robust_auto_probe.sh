#!/usr/bin/env bash
# robust_auto_probe.sh — signals while `run --save-at auto` trains its fp16
# probe (harness/run_auto.c; docs/robustness.md "The fp16 probe"), on the
# real CPU core. `run` is started in the background of this script, where
# the shell ignores SIGINT for it (as CI runners and `nohup` do): only a
# handler of its own can see that signal. Asserted:
#   - SIGINT: exit 130 within seconds, no leg started, no probe process
#     left, no probe directory in --out or $TMPDIR;
#   - SIGTERM: the same with 143;
#   - SIGKILL of `run`: the probe process is gone within 5 s (its supervisor
#     kills it); the probe directory stays in --out, never in $TMPDIR, and
#     the next run into --out removes it.
# Controls, RC_TEST_PROBE_UNSUPERVISED=1 (the probe as before: a plain
# child, waited for blindly, in $TMPDIR): SIGINT is lost (run and probe
# still running a second later); SIGTERM ends `run` (143) but leaves the
# probe running and $TMPDIR/resumecheck-auto.* behind; SIGKILL leaves the
# probe running.
source "$(dirname "$0")/run_lib.sh"
need_train
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
# fp16 (so the probe runs) and long enough that the probe is still training
PROBE=(--precision fp16 --steps 400 --save-at auto --progress off --jobs 2)

probe_dirs() { ls -d "$1"/.auto-probe.* "$TMPDIR"/resumecheck-auto.* 2>/dev/null; }
# start NAME: run in the background; returns once the probe has trained a step
start() {
  "$RC_BIN" run "${PROBE[@]}" --out "$T/$1" >"$T/$1.out" 2>"$T/$1.err" &
  rpid=$!
  local i
  for i in $(seq 300); do
    [ -n "$(ls "$T/$1"/.auto-probe.*/probe/trace.csv "$TMPDIR"/resumecheck-auto.*/probe/trace.csv 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  fail "$1: the probe never started"
}
# ends SIG WANT NAME: sends SIG, then run must end with WANT within 10 s
ends() {
  kill -"$1" "$rpid"
  local i
  for i in $(seq 100); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$rpid" 2>/dev/null; then
    fail "$3: run still running 10 s after SIG$1"
    kill -KILL "$rpid"
  fi
  wait "$rpid"
  rc=$?
  [ "$rc" = "$2" ] || fail "$3: exit $rc after SIG$1, want $2: $(cat "$T/$3.err")"
}

for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  start "$sig"
  ends "$sig" "$want" "$sig"
  contains "$T/$sig.err" "interrupted by SIG$sig during --save-at auto's fp16 probe"
  gone_within "$T/$sig/" 5 || fail "SIG$sig: probe still running: $(procs_in "$T/$sig/")"
  [ -z "$(probe_dirs "$T/$sig")" ] || fail "SIG$sig: left $(probe_dirs "$T/$sig")"
  [ -e "$T/$sig/through" ] && fail "SIG$sig: a leg was started"
done

start KILL
kill -KILL "$rpid"
wait "$rpid" 2>/dev/null
gone_within "$T/KILL/" 5 || fail "SIGKILL: the probe outlived run by 5 s: $(procs_in "$T/KILL/")"
[ -z "$(ls "$TMPDIR")" ] || fail "SIGKILL: the probe used \$TMPDIR: $(ls "$TMPDIR")"
[ -n "$(ls -d "$T/KILL"/.auto-probe.* 2>/dev/null)" ] || fail "SIGKILL: no probe directory in --out"
# the next run into the directory removes what the killed one left
run_rc KILL2 --steps 4 --save-at 2 --progress off --out "$T/KILL"
expect_rc 0 "the run after a SIGKILLed probe" KILL2
[ -z "$(ls -d "$T/KILL"/.auto-probe.* 2>/dev/null)" ] || fail "the next run left the stale probe directory"

# ---- controls: the probe as before
# kills the probes a control left and removes their directories, so that
# the next control's start() sees its own probe
clean_controls() {
  local p
  for p in $(procs_in "$TMPDIR/resumecheck-auto."); do kill -KILL "$p" 2>/dev/null; done
  gone_within "$TMPDIR/resumecheck-auto." 5 || fail "could not clean up the control's probes"
  rm -rf "${TMPDIR:?}"/resumecheck-auto.*
}
export RC_TEST_PROBE_UNSUPERVISED=1
start cINT
kill -INT "$rpid"
sleep 1
kill -0 "$rpid" 2>/dev/null || fail "control: SIGINT was not lost (run ended)"
[ -n "$(procs_in "$TMPDIR/resumecheck-auto.")" ] || fail "control: SIGINT was not lost (no probe running)"
kill -KILL "$rpid"
wait "$rpid" 2>/dev/null
clean_controls

start cTERM
kill -TERM "$rpid"
wait "$rpid"
rc=$?
[ "$rc" = 143 ] || fail "control: SIGTERM: exit $rc, want 143"
sleep 0.5
[ -n "$(procs_in "$TMPDIR/resumecheck-auto.")" ] || fail "control: SIGTERM did not leave the probe running"
[ -n "$(ls -d "$TMPDIR"/resumecheck-auto.* 2>/dev/null)" ] || fail "control: SIGTERM left no temp directory"
clean_controls

start cKILL
kill -KILL "$rpid"
wait "$rpid" 2>/dev/null
sleep 0.5
[ -n "$(procs_in "$TMPDIR/resumecheck-auto.")" ] || fail "control: SIGKILL did not orphan the probe"
clean_controls
unset RC_TEST_PROBE_UNSUPERVISED
finish
