#!/usr/bin/env bash
# run_seed_confirm.sh — the confirming arm: with policy legacy the resume
# divergence is present with fusion on and absent with fusion off
# ("mechanism confirmed"), and the arms' through@N differ too (every fresh
# process overwrites at its first step: wrong in every leg alike). Control:
# with the fix (resolve) there is nothing to confirm and the arms agree.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer)
run_rc conf "${F[@]}" --first-microbatch-policy legacy --confirm-arm --steps 10 --save-at 5 --out "$T/c" --progress off
expect_rc 1 "legacy, confirming arm" conf
contains "$T/conf.out" "mechanism confirmed"
contains "$T/conf.out" "fusion-on: RESUME diverged at step 6"
contains "$T/conf.out" "fusion-off: RESUME identical"
R="$T/c/report.json"
json_true "$R" "d['confirm']['mechanism'] == 'confirmed'" "mechanism in the report"
json_true "$R" "[c['status'] for c in d['checks'] if c['name'] == 'ARMS@10'] == ['differs']" "ARMS@10 differs under legacy"
json_true "$R" "not any(x['object'] and x['object'].startswith('/meta') for c in d['checks'] if c['name'] == 'ARMS@10' for x in c['state']['diffs'])" "ARMS ignores /meta"

run_rc fix "${F[@]}" --first-microbatch-policy resolve --confirm-arm --steps 10 --save-at 5 --out "$T/f" --progress off
expect_rc 0 "resolve, confirming arm" fix
contains "$T/fix.out" "nothing to confirm"
json_true "$T/f/report.json" "[c['status'] for c in d['checks'] if c['name'] == 'ARMS@10'] == ['identical']" "ARMS@10 identical under resolve"
finish
