#!/usr/bin/env bash
# noise_run.sh — `run --noise calibrated` on the built-in core made not
# bitwise deterministic (RC_CPU_SUM_ORDER=shuffled): a handful of correct
# configurations pass "within run-to-run noise" (exit 0) while their A/A
# pairs really differ (noise measured, not identical); judged byte for byte
# the same run fails A/A (exit 2, the control that the noise is real).
# The exact checks still fail at once, with today's words: a census bug at
# K (optimizer-step-not-saved: "RESUME diverged at the resume point (an
# exact check"), a data-position bug on the exact trace column
# consumed_samples; the seed's legacy policy and a main_grad bug the census
# cannot see exceed the noise (exit 1, "exceeds run-to-run noise by").
# report.json keeps the kinds apart (judged, calibration), the text report
# prints them in groups, JUnit fails an exceeding check. Usage: calibrated
# needs --aa 2 or more, refuses --confirm-arm and hashes-only through
# checkpoints (64). bench/bench_noise.sh measures the same on >= 30
# configurations and >= 100 A/A pairs.
source "$(dirname "$0")/run_lib.sh"
need_train
export RC_CPU_SUM_ORDER=shuffled
cal() { # NAME FLAGS...: a calibrated run of tiny, N=8
  local name=$1
  shift
  run_rc "$name" "$@" --steps 8 --noise calibrated --out "$T/$name" --jobs 2 --progress off
}

# correct configurations: within the noise, and the noise was there
i=0
for flags in "--save-at 4" "--precision fp32 --save-at every" \
  "--precision fp16 --loss-scale-window 3 --dropout 0.1 --save-at 3" \
  "--moe-layers none --mtp-depths 1 --microbatches 3 --save-at 1,6"; do
  i=$((i + 1))
  # shellcheck disable=SC2086 # the flags are words
  cal clean$i $flags
  expect_rc 0 "clean configuration '$flags'" clean$i
  json_true "$T/clean$i/report.json" "d['verdict'] == 'within-noise'" "'$flags': within-noise"
  json_true "$T/clean$i/report.json" \
    "any(c['judged'] == 'noise' and c['status'] == 'noise-measured' for c in d['checks'])" \
    "'$flags': the A/A pairs measured noise (not identical)"
  json_true "$T/clean$i/report.json" \
    "all(c['status'] in ('identical', 'within-noise') for c in d['checks'] if c['judged'] in ('exact', 'calibrated'))" \
    "'$flags': every exact and calibrated check passes"
done
contains "$T/clean1.out" "verdict: WITHIN RUN-TO-RUN NOISE (exit 0"
contains "$T/clean1.out" "exact checks (they hold whatever the noise"
contains "$T/clean1.out" "calibrated checks (against the run-to-run noise"
contains "$T/clean1.out" "A/A: 3 fresh runs (3 pairs) differ only where run-to-run noise may"
# the kinds in report.json: exact census and exact trace columns, calibrated
# trace and state, noise pairs; the rule and what it cost
R="$T/clean1/report.json"
json_true "$R" "d['config']['noise'] == 'calibrated' and d['config']['aa_count'] == 2" "config.noise"
json_true "$R" "d['config']['training_steps'] == 3 * 8 + 2 * 4 and d['config']['resumes'] == 2" "training_steps: 3 fresh legs and two resume legs"
json_true "$R" "d['calibration']['rule']['factor'] == 4 and len(d['calibration']['fresh_legs']) == 3" \
  "the rule and the fresh legs"
json_true "$R" "{c['name']: c['judged'] for c in d['checks']}['CENSUS resume@4'] == 'exact'" "census: exact"
json_true "$R" "{c['name']: c['judged'] for c in d['checks']}['TRACE resume@4 exact'] == 'exact'" \
  "exact trace columns"
json_true "$R" "{c['name']: c['judged'] for c in d['checks']}['TRACE resume@4'] == 'calibrated'" \
  "noisy trace columns"
json_true "$R" "{c['name']: c['judged'] for c in d['checks']}['RESUME@4→8'] == 'calibrated'" \
  "float state"
json_true "$R" "[k['kind'] for c in d['checks'] if c['name'] == 'TRACE resume@4' for k in c['calibration']['columns'] if k['name'] in ('loss', 'lr', 'consumed_samples', 'fp_params', 'mtp_acc_1')] == ['noisy', 'discrete', 'exact', 'exact', 'fingerprint']" \
  "column kinds of the built-in trace"
# control: the same configuration judged byte for byte fails A/A
run_rc bytes1 --save-at 4 --steps 8 --aa --out "$T/bytes1" --jobs 2 --progress off
expect_rc 2 "the same configuration with --noise bytes (A/A fails: the noise is real)" bytes1

# exact checks fail at once, whatever the noise
cal census --save-at 4 --inject optimizer-step-not-saved
expect_rc 1 "optimizer-step-not-saved" census
contains "$T/census.out" "RESUME diverged at the resume point (an exact check, whatever the noise)"
contains "$T/census.out" "optimizer.step: through 4, resumed 0"
json_true "$T/census/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'CENSUS resume@4'] == ['differs'] and d['verdict'] == 'resume-diverged'" \
  "the census check (exact) differs"
cal data --save-at 4 --inject data-position-not-saved
expect_rc 1 "data-position-not-saved" data
contains "$T/data.out" "RESUME diverged at step 5: tokens, consumed_samples differ"
json_true "$T/data/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'TRACE resume@4 exact'] == ['differs']" \
  "the exact trace columns differ"

# what only the trajectory shows exceeds the noise
cal seed --save-at 4 --first-microbatch-policy legacy --junit "$T/seed.xml"
expect_rc 1 "the seed's legacy policy" seed
contains "$T/seed.out" "verdict: EXCEEDS RUN-TO-RUN NOISE (exit 1"
contains "$T/seed.out" "RESUME exceeds run-to-run noise by"
json_true "$T/seed/report.json" \
  "d['verdict'] == 'exceeds-noise' and d['first_divergence']['step'] == 5 and [c['status'] for c in d['checks'] if c['name'] == 'CENSUS resume@4'] == ['identical']" \
  "legacy: exceeds the noise at K+1, the census sees nothing"
grep -q 'type="exceeds-noise"' "$T/seed.xml" || fail "JUnit: no exceeds-noise failure"
contains "$T/seed.out" "reproduced: all 6 resume legs at 4 exceed it"
json_true "$T/seed/report.json" "sum(l['confirming'] for l in d['legs']) == 4 and d['config']['training_steps'] == 3 * 8 + 6 * 4" \
  "legacy: both resume legs exceeded, 4 confirming legs ran and exceed too"
json_true "$T/clean1/report.json" "not any(l['confirming'] for l in d['legs'])" "clean: no confirming leg"
cal grad --save-at 4 --inject grad-buffer-not-zeroed-after-load
expect_rc 1 "grad-buffer-not-zeroed-after-load" grad
json_true "$T/grad/report.json" "d['verdict'] == 'exceeds-noise'" "grad buffer: exceeds-noise"

# usage
run_rc u1 --steps 8 --save-at 4 --noise calibrated --aa 1 --out "$T/u1"
expect_rc 64 "--noise calibrated --aa 1" u1
contains "$T/u1.err" "--noise calibrated needs --aa 2 or more"
run_rc u2 --steps 8 --save-at 4 --noise calibrated --confirm-arm --out "$T/u2"
expect_rc 64 "--noise calibrated --confirm-arm" u2
run_rc u3 --steps 8 --save-at 4 --noise calibrated --through-checkpoints hashes --out "$T/u3"
expect_rc 64 "--noise calibrated --through-checkpoints hashes" u3
run_rc u4 --steps 8 --save-at 4 --noise sometimes --out "$T/u4"
expect_rc 64 "--noise sometimes" u4
finish
