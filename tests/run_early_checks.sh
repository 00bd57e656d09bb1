#!/usr/bin/env bash
# run_early_checks.sh — `run` compares each state check's checkpoints as soon
# as both are complete, while later legs still run (rc_run_early_checks_poll):
# A/A@K and RESUME are marked during_legs in report.json, and the verdict,
# exit code, first divergence and every check's status and summary are the
# same as when every check runs after the legs. Negative control: with
# RC_TEST_NO_EARLY_CHECKS=1 no check is marked during_legs. Seed (legacy:
# diverges at K+1) and resolve (identical), with --aa and a chain.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --progress off)
same() { # DIR_EARLY DIR_LATE: one verdict, one set of checks
  json_true "$1/report.json" "(lambda e: d['verdict'] == e['verdict'] and d['exit_code'] == e['exit_code'] and d['first_divergence'] == e['first_divergence'] and [(c['name'], c['status'], c['summary']) for c in d['checks']] == [(c['name'], c['status'], c['summary']) for c in e['checks']])(json.load(open('$2/report.json')))" "$1 vs $2: the same verdict and checks"
}
for policy in legacy resolve; do
  want=0
  [ "$policy" = legacy ] && want=1
  run_rc "e_$policy" "${F[@]}" --first-microbatch-policy "$policy" --steps 10 --save-at 5 --aa \
    --out "$T/e_$policy"
  expect_rc "$want" "$policy, checks during the legs" "e_$policy"
  json_true "$T/e_$policy/report.json" "[c['during_legs'] for c in d['checks'] if c['name'] == 'A/A@5'] == [True]" "$policy: A/A@5 ran while the resumed leg trained"
  json_true "$T/e_$policy/report.json" "all(not c['during_legs'] for c in d['checks'] if c['name'].startswith(('TRACE', 'CENSUS')))" "$policy: trace and census checks after the legs"
  RC_TEST_NO_EARLY_CHECKS=1 run_rc "l_$policy" "${F[@]}" --first-microbatch-policy "$policy" \
    --steps 10 --save-at 5 --aa --out "$T/l_$policy"
  expect_rc "$want" "$policy, every check after the legs" "l_$policy"
  json_true "$T/l_$policy/report.json" "not any(c['during_legs'] for c in d['checks'])" "control: no check during the legs"
  same "$T/e_$policy" "$T/l_$policy"
done
# a chain: every RESUME of it decided as before
run_rc chain "${F[@]}" --first-microbatch-policy legacy --steps 8 --save-at 3,6 --out "$T/c"
RC_TEST_NO_EARLY_CHECKS=1 run_rc chain_l "${F[@]}" --first-microbatch-policy legacy --steps 8 \
  --save-at 3,6 --out "$T/cl"
expect_rc 1 "chain, early" chain
expect_rc 1 "chain, late" chain_l
json_true "$T/c/report.json" "any(c['during_legs'] for c in d['checks'])" "chain: some check ran during the legs"
same "$T/c" "$T/cl"
finish
