#!/usr/bin/env bash
# run_exec_forget.sh — a trainer that forgets its momentum on resume: A/A
# identical, RESUME diverges one step after K with the loss still equal,
# the report names the file (optim.txt) and, from the trainer's state
# census, the field (momentum), exit 1. Control: the same trainer without
# the bug exits 0.
source "$(dirname "$0")/run_lib.sh"

run_rc forget --trainer exec --train-cmd "$(tmpl --bug forget-momentum --census good)" --steps 8 --save-at 3 \
  --out "$T/f" --junit "$T/f.xml" --summary-md "$T/f.md" --plot "$T/f.svg" --progress off
expect_rc 1 "forgotten momentum" forget
contains "$T/forget.out" "A/A identical (through@3 vs save@3"
contains "$T/forget.out" "RESUME diverged at step 4: grad_norm differs; loss equal"
contains "$T/forget.out" "first differing file: optim.txt"
contains "$T/forget.out" "verdict: RESUME DIVERGED (exit 1"
R="$T/f/report.json"
json_true "$R" "d['verdict'] == 'resume-diverged' and d['exit_code'] == 1" "verdict"
json_true "$R" "d['first_divergence']['step'] == 4 and d['first_divergence']['columns'] == ['grad_norm']" "first divergence"
json_true "$R" "'loss' in d['first_divergence']['equal_columns']" "loss equal"
json_true "$R" "any(x['file'] == 'optim.txt' and x['kind'] == 'bytes' for c in d['checks'] if c['state'] for x in c['state']['diffs'])" "optim.txt in the diffs"
json_true "$R" "[c['status'] for c in d['checks']] == ['identical', 'differs', 'identical', 'differs', 'differs']" "check statuses"
contains "$T/forget.out" "census: state census at step 3 (resume@3): 1 saved field differs; first: momentum: through"
json_true "$R" "'momentum' in d['census_finding'] and 'resumed 0' in d['census_finding']" "census finding"
xml_ok "$T/f.xml" "JUnit"
contains "$T/f.xml" 'failures="3"'
contains "$T/f.xml" "optim.txt"
contains "$T/f.md" "first differing file: \`optim.txt"
xml_ok "$T/f.svg" "SVG"
contains "$T/f.svg" "first divergence: step 4"

# control: the same trainer without the bug
run_rc ok --trainer exec --train-cmd "$(tmpl --bug none --census good)" --steps 8 --save-at 3 --out "$T/ok" --progress off
expect_rc 0 "control without the bug" ok
grep -Eq "CENSUS resume@3 +identical" "$T/ok.out" || fail "control: the census check is not identical"
finish
