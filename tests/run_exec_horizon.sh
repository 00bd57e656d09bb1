#!/usr/bin/env bash
# run_exec_horizon.sh — a deterministic trainer whose LR schedule is built
# for the step a leg stops at (fake_trainer.sh --bug horizon): the save leg,
# told to stop at K, is not a prefix of the through leg. With --aa two
# through legs agree, so the verdict is not-a-prefix (exit 3) naming step 1,
# column lr, and the horizon hint; without --aa the verdict stays aa-failed
# (exit 2) but names both explanations and suggests --aa. Controls: a
# trainer writing random bytes still fails A/A with --aa (through vs aa
# differ, exit 2); a correct trainer with --aa is identical (exit 0).
source "$(dirname "$0")/run_lib.sh"

common=(--steps 6 --save-at 3 --progress off)

# --aa: deterministic, not a prefix
run_rc hz --trainer exec --train-cmd "$(tmpl --bug horizon)" "${common[@]}" --aa --out "$T/hz" \
  --junit "$T/hz.xml" --summary-md "$T/hz.md"
expect_rc 3 "horizon trainer with --aa" hz
contains "$T/hz.out" "verdict: SAVE LEG NOT A PREFIX (exit 3"
contains "$T/hz.out" "the save leg is not a prefix of the through leg"
contains "$T/hz.out" "two through legs agree (A/A@6 identical)"
contains "$T/hz.out" "first at step 1, column lr (lr differs; loss equal)"
contains "$T/hz.out" "A/A identical (through@6 vs aa@6"
contains "$T/hz.out" "SAVE LEG NOT A PREFIX (through@3 vs save@3"
contains "$T/hz.out" "hint: the schedule depends on where the leg stops — keep the horizon at N"
contains "$T/hz.out" "built for --steps 6, not for the step the leg stops at"
lacks "$T/hz.out" "not deterministic"
json_true "$T/hz/report.json" "d['verdict'] == 'not-a-prefix' and d['exit_code'] == 3" "not-a-prefix verdict"
json_true "$T/hz/report.json" "d['first_divergence']['check'] == 'TRACE save' and d['first_divergence']['step'] == 1 and d['first_divergence']['columns'] == ['lr']" "first divergence: step 1, lr"
json_true "$T/hz/report.json" "'keep the horizon at N' in d['verdict_hint']" "horizon hint in report.json"
json_true "$T/hz/report.json" "[c['status'] for c in d['checks'] if c['name'] in ('A/A@6', 'TRACE aa')] == ['identical', 'identical']" "through vs aa identical"
contains "$T/hz.xml" 'name="verdict" value="not-a-prefix"'
contains "$T/hz.xml" 'type="not-a-prefix"'
lacks "$T/hz.xml" 'type="aa-failure"'
xml_ok "$T/hz.xml" "the horizon run's JUnit"
contains "$T/hz.md" "## resumecheck: SAVE LEG NOT A PREFIX (exit 3)"
contains "$T/hz.md" "- hint: the schedule depends on where the leg stops"

run_rc hzb --trainer exec --train-cmd "$(tmpl --bug horizon)" "${common[@]}" --aa --out "$T/hzb" --git-bisect
expect_rc 125 "not a prefix under --git-bisect is untestable" hzb

# without --aa: the old verdict, both explanations, the --aa suggestion
run_rc hn --trainer exec --train-cmd "$(tmpl --bug horizon)" "${common[@]}" --out "$T/hn"
expect_rc 2 "horizon trainer without --aa" hn
contains "$T/hn.out" "verdict: A/A FAILED (exit 2"
contains "$T/hn.out" "either the run is not deterministic, or the save leg is not a prefix of the through leg (e.g. a schedule built for the leg's own stop step)"
contains "$T/hn.out" "hint: re-run with --aa to tell them apart"
json_true "$T/hn/report.json" "d['verdict'] == 'aa-failed' and 're-run with --aa' in d['verdict_hint']" "aa-failed with the --aa hint"

# control: random bytes in every checkpoint; through vs aa differ too
run_rc nd --trainer exec --train-cmd "$(tmpl --bug nondet)" "${common[@]}" --aa --out "$T/nd"
expect_rc 2 "control: non-deterministic trainer with --aa" nd
contains "$T/nd.out" "verdict: A/A FAILED (exit 2"
contains "$T/nd.out" "two fresh processes differ, so the run is not deterministic"
contains "$T/nd.out" "A/A FAILED (through@6 vs aa@6"
lacks "$T/nd.out" "not a prefix"
json_true "$T/nd/report.json" "d['verdict'] == 'aa-failed' and d['verdict_hint'] is None" "A/A verdict, no hint"

# control: a correct trainer with --aa
run_rc ok --trainer exec --train-cmd "$(tmpl)" "${common[@]}" --aa --out "$T/ok"
expect_rc 0 "control: correct trainer with --aa" ok
json_true "$T/ok/report.json" "d['verdict'] == 'identical' and d['verdict_hint'] is None" "identical"
finish
