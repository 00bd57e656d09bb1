#!/usr/bin/env bash
# run_prewarm.sh — pre-warmed resume legs on the real CPU core. With job
# slots for every leg, each resume leg starts at once (`train
# --wait-for-checkpoint`), sets up, waits for its checkpoint and only then
# loads: the seed must still behave as with a fresh process (legacy
# diverges at K+1 in grad_norm with the loss equal; resolve is identical),
# for a single K, a chain and --save-at every. Negative controls: in the
# same runs the legs that load nothing have no wait phase, and an exec
# trainer's resume leg still starts only after its producer has finished.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer)
prewarmed() { # DIR LEG: the leg waited (timing.csv has a wait row, the report says so)
  grep -q '^wait,,' "$1/$2/timing.csv" || fail "$2 in $1: no wait row in timing.csv"
  contains "$1/$2/log.txt" "waiting for"
  json_true "$1/report.json" "[l for l in d['legs'] if l['label'] == '$2'][0]['prewarmed'] is True" "$2 pre-warmed"
}

run_rc legacy "${F[@]}" --first-microbatch-policy legacy --steps 10 --save-at 5 --out "$T/l" \
  --jobs 3 --progress plain
expect_rc 1 "legacy, pre-warmed" legacy
prewarmed "$T/l" resume@5
contains "$T/legacy.err" "leg resume@5 started (steps 5→10), waiting for save@5"
contains "$T/legacy.out" "A/A identical (through@5 vs save@5"
contains "$T/legacy.out" "RESUME diverged at step 6: grad_norm"
contains "$T/legacy.out" "; loss equal"
json_true "$T/l/report.json" "d['first_divergence']['step'] == 6 and 'loss' in d['first_divergence']['equal_columns']" "diverges at 6, loss equal"
contains "$T/legacy.out" "start-up, summed over 3 legs: exec"
json_true "$T/l/report.json" "all(l['timing']['model_init_s'] is not None for l in d['legs'])" "timing per leg"
# the report's timeline: a pre-warmed leg starts before its producer ends
# (negative control: an exec trainer's below), and the run's phases add up
# to its wall time
json_true "$T/l/report.json" "(lambda L: L['resume@5']['started_s'] < L['save']['started_s'] + L['save']['wall_s'])({l['label']: l for l in d['legs']})" "resume@5 started before save ended"
json_true "$T/l/report.json" "abs(sum(d['phases_s'].values()) - d['wall_s']) < 0.05 and min(d['phases_s'].values()) >= 0" "run phases add up to wall_s"
contains "$T/legacy.out" "time: "
# negative control: the legs that load nothing did not wait
for leg in through save; do
  if grep -q '^wait,' "$T/l/$leg/timing.csv"; then fail "$leg has a wait row"; fi
done
json_true "$T/l/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['prewarmed'] is False" "through not pre-warmed"

run_rc resolve "${F[@]}" --first-microbatch-policy resolve --steps 10 --save-at 5 --out "$T/r" \
  --jobs 3 --progress off
expect_rc 0 "resolve, pre-warmed" resolve
prewarmed "$T/r" resume@5

# a chain: resume@6 waits for the checkpoint resume@3 writes
run_rc chain "${F[@]}" --first-microbatch-policy resolve --steps 8 --save-at 3,6 --out "$T/c" \
  --jobs 4 --progress off
expect_rc 0 "chain 3,6, pre-warmed" chain
prewarmed "$T/c" resume@3
prewarmed "$T/c" resume@6

run_rc every "${F[@]}" --first-microbatch-policy resolve --steps 4 --save-at every --out "$T/e" \
  --jobs 5 --progress off
expect_rc 0 "every, pre-warmed" every
for k in 1 2 3; do prewarmed "$T/e" "resume@$k"; done

run_rc ev_legacy "${F[@]}" --first-microbatch-policy legacy --steps 4 --save-at every --out "$T/el" \
  --jobs 5 --progress off
expect_rc 1 "every, legacy, pre-warmed" ev_legacy
contains "$T/ev_legacy.out" "RESUME diverged at step 2: grad_norm"

# exec trainers keep the old order: resume@2 starts after save finished
run_rc exec --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/x" --jobs 4 \
  --progress plain
expect_rc 0 "exec trainer" exec
s=$(grep -n "leg save finished" "$T/exec.err" | cut -d: -f1)
r=$(grep -n "leg resume@2 started" "$T/exec.err" | cut -d: -f1)
[ -n "$s" ] && [ -n "$r" ] && [ "$s" -lt "$r" ] || fail "exec trainer: resume@2 started before save finished"
lacks "$T/exec.err" "waiting for"
# negative control of the timeline check above: here it must not hold
json_true "$T/x/report.json" "(lambda L: L['resume@2']['started_s'] >= L['save']['started_s'] + L['save']['wall_s'] - 0.05)({l['label']: l for l in d['legs']})" "exec: resume@2 started after save ended (report timeline)"
finish
