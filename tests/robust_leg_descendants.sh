#!/usr/bin/env bash
# robust_leg_descendants.sh — nothing an exec trainer starts outlives its
# leg (harness/run_spawn.c: the leg's supervisor is its child subreaper;
# docs/robustness.md "Nothing a leg starts outlives it"). The trainer is
# the fake one behind a wrapper that first leaves three processes behind:
# a background job in its process group, a `setsid` daemon in a session of
# its own, and a double-forked `setsid` daemon re-parented at once. Asserted:
#   - a run that ends normally (exit 0): none of them is left a second later;
#   - `run` SIGKILLed mid-leg (slow trainer): none is left 5 s later.
# Control: RC_TEST_NO_SUBREAPER=1 (no subreaper, nothing killed after the
# trainer) leaves the daemons running after a normal run.
source "$(dirname "$0")/run_lib.sh"

cat >"$T/daemon.sh" <<'EOF'
#!/usr/bin/env bash
# a process a trainer leaves behind: sleeps, ignoring SIGTERM and SIGHUP
trap '' TERM HUP
sleep 600
EOF
cat >"$T/trainer.sh" <<EOF
#!/usr/bin/env bash
# starts three processes it never waits for, then trains
bash "$T/daemon.sh" job &
setsid bash "$T/daemon.sh" session &
( setsid bash "$T/daemon.sh" double & )
exec bash "$FAKE" "\$@"
EOF
TM="bash '$T/trainer.sh' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"

kill_daemons() {
  local p
  for p in $(procs_in "$T/daemon.sh"); do kill -KILL "$p" 2>/dev/null; done
  gone_within "$T/daemon.sh" 5 || fail "could not clean up the daemons"
}

# ---- a run that ends normally
run_rc ok --trainer exec --train-cmd "$TM" --steps 4 --save-at 2 --progress off --out "$T/ok"
expect_rc 0 "run with a trainer that leaves daemons" ok
gone_within "$T/daemon.sh" 1 || fail "daemons outlived their legs: $(procs_in "$T/daemon.sh")"
kill_daemons

# ---- run SIGKILLed while a slow leg runs
"$RC_BIN" run --trainer exec --train-cmd "$TM --bug slow" --steps 200 --save-at 100 --progress off \
  --out "$T/k" >"$T/k.out" 2>"$T/k.err" &
rpid=$!
for _ in $(seq 300); do [ -n "$(procs_in "$T/daemon.sh")" ] && [ -s "$T/k/through/trace.csv" ] && break; sleep 0.1; done
[ -n "$(procs_in "$T/daemon.sh")" ] || fail "the slow legs never started their daemons"
kill -KILL "$rpid"
wait "$rpid" 2>/dev/null
gone_within "$T/daemon.sh" 5 || fail "daemons outlived a SIGKILLed run by 5 s: $(procs_in "$T/daemon.sh")"
kill_daemons

# ---- control: without the subreaper the daemons stay
RC_TEST_NO_SUBREAPER=1 run_rc ctl --trainer exec --train-cmd "$TM" --steps 4 --save-at 2 --progress off --out "$T/ctl"
expect_rc 0 "control run" ctl
sleep 1
left=$(procs_in "$T/daemon.sh" | wc -l)
[ "$left" -ge 3 ] || fail "control: without the subreaper only $left daemon processes stayed (want the session and double-forked ones of each leg)"
kill_daemons
finish
