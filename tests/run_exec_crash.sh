#!/usr/bin/env bash
# run_exec_crash.sh — legs that fail: a non-zero exit, a signal, a leg that
# exits 0 without its checkpoint, a checkpoint that cannot be compared. Each is reported with its exit status and
# the last lines of its log, exit 70 (125 with --git-bisect); checks whose
# checkpoints exist still run; legs that need a failed leg's checkpoint are
# not started.
source "$(dirname "$0")/run_lib.sh"

run_rc crash --trainer exec --train-cmd "$(tmpl --bug crash-on-resume)" --steps 6 --save-at 3 \
  --out "$T/c" --junit "$T/c.xml" --progress off
expect_rc 70 "a crashing resume leg" crash
contains "$T/crash.out" "leg resume@3 failed: exited with status 3"
contains "$T/crash.out" "| fake_trainer: simulated crash while loading"
contains "$T/crash.out" "reproduce: bash"
json_true "$T/c/report.json" "[c for c in d['checks'] if c['name'] == 'A/A@3'][0]['status'] == 'identical'" "A/A still compared"
contains "$T/crash.out" "verdict: LEG FAILED (exit 70"
json_true "$T/c/report.json" "[l for l in d['legs'] if l['label'] == 'resume@3'][0]['exit_code'] == 3" "leg exit code"
json_true "$T/c/report.json" "'simulated crash' in [l for l in d['legs'] if l['label'] == 'resume@3'][0]['log_tail']" "log tail"
json_true "$T/c/report.json" "d['verdict'] == 'leg-failed' and d['exit_code'] == 70" "verdict"
xml_ok "$T/c.xml" "JUnit"
contains "$T/c.xml" 'type="leg-failed"'

run_rc crashb --trainer exec --train-cmd "$(tmpl --bug crash-on-resume)" --steps 6 --save-at 3 \
  --out "$T/cb" --progress off --git-bisect
expect_rc 125 "a crashing leg under --git-bisect" crashb

run_rc segv --trainer exec --train-cmd "$(tmpl --bug segv-on-resume)" --steps 6 --save-at 3 --out "$T/s" --progress off
expect_rc 70 "a leg killed by a signal" segv
contains "$T/segv.out" "killed by signal 11"
json_true "$T/s/report.json" "[l for l in d['legs'] if l['label'] == 'resume@3'][0]['signal'] == 11" "signal in the report"

run_rc nc --trainer exec --train-cmd "$(tmpl --bug no-complete)" --steps 6 --save-at 3 --out "$T/nc" --progress off
expect_rc 70 "a leg without its checkpoint" nc
contains "$T/nc.out" "exited 0 but wrote no complete checkpoint ckpt/iter_0000003 (no COMPLETE marker)"

# a checkpoint that cannot be compared (not HDF5 though named .h5): the
# comparison's own error code (65, bad data), 125 under --git-bisect
run_rc bad --trainer exec --train-cmd "$(tmpl --bug corrupt-shard)" --steps 4 --save-at 2 --out "$T/b" --progress off
expect_rc 65 "an unreadable shard" bad
contains "$T/bad.out" "A/A@2 could not run"
contains "$T/bad.out" "cannot open as HDF5"
json_true "$T/b/report.json" "d['verdict'] == 'error' and d['checks'][0]['status'] == 'error'" "error verdict"
run_rc badb --trainer exec --train-cmd "$(tmpl --bug corrupt-shard)" --steps 4 --save-at 2 --out "$T/bb" --progress off --git-bisect
expect_rc 125 "an unreadable shard under --git-bisect" badb

# in a chain, the link after a crashed one is never started
run_rc chain --trainer exec --train-cmd "$(tmpl --bug crash-on-resume)" --steps 8 --save-at 3,5 \
  --out "$T/ch" --progress off --keep-going
expect_rc 70 "a crashing chain" chain
contains "$T/chain.out" "skipped: not started: it needs the checkpoint of resume@3 at step 5, and resume@3 failed"
json_true "$T/ch/report.json" "{l['label']: l['status'] for l in d['legs']} == {'through': 'ok', 'save': 'ok', 'resume@3': 'failed', 'resume@5': 'skipped'}" "leg states with --keep-going"
finish
