#!/usr/bin/env bash
# bisect_exec_lock.sh — one bisect at a time per replay directory
# (docs/bisect.md, "Exit codes"). While a bisect replays a run (an exec
# trainer whose replays take 3 s: a wrapper around tests/trainers/fake_trainer.sh
# sleeps when RC_EVENTS, bisect's event switch, is set), a second bisect of
# the same run is refused at once with exit 64 and a message naming the
# first's pid, and the first ends as it would alone. Negative controls: the
# lock is a real flock (`flock -n` cannot take it meanwhile), and once the
# first has ended the same second bisect runs (exit 1, its verdict).
source "$(dirname "$0")/run_lib.sh"

cat >"$T/slow_replay.sh" <<'SH'
#!/usr/bin/env bash
# the fake trainer ($1), 3 s slower while bisect replays it
if [ -n "${RC_EVENTS:-}" ]; then sleep 3; fi
exec bash "$@"
SH
tmpl_slow() {
  printf "bash '%s' '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} %s" \
    "$T/slow_replay.sh" "$FAKE" "$*"
}
run_rc run --trainer exec --train-cmd "$(tmpl_slow --bug forget-momentum)" --steps 6 --save-at 3 --out "$T/r" --progress off
expect_rc 1 "the run" run

"$RC_BIN" bisect "$T/r" >"$T/a.out" 2>"$T/a.err" &
apid=$!
for _ in $(seq 100); do # up to 10 s for the first bisect to take its lock
  [ -s "$T/r/bisect/.lock" ] && break
  sleep 0.1
done
[ -s "$T/r/bisect/.lock" ] || fail "the first bisect never took $T/r/bisect/.lock"
if command -v flock >/dev/null; then
  flock -n "$T/r/bisect/.lock" true && fail "flock -n took the lock while the first bisect holds it"
fi
"$RC_BIN" bisect "$T/r" >"$T/b.out" 2>"$T/b.err"
rc=$?
expect_rc 64 "a second bisect of the same run, concurrently" b
contains "$T/b.err" "another \`resumecheck bisect\` (pid $apid) is using $T/r/bisect"
kill -0 "$apid" 2>/dev/null || fail "the first bisect ended before the second was refused (the test proves nothing)"
wait "$apid"
rc=$?
expect_rc 1 "the first bisect" a
contains "$T/a.out" "but they wrote no event log"

# control: alone, the second bisect runs
"$RC_BIN" bisect "$T/r" >"$T/c.out" 2>"$T/c.err"
rc=$?
expect_rc 1 "the same bisect after the first ended" c
contains "$T/c.out" "but they wrote no event log"
finish
