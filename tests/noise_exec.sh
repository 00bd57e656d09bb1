#!/usr/bin/env bash
# noise_exec.sh — `run --trainer exec --noise calibrated` with a trainer
# that is not bitwise deterministic (tests/trainers/noisy_numpy_trainer.py:
# Adam on a linear model whose gradient is a float32 sum in an order drawn
# per process; numpy only, quick). Correct: within run-to-run noise (exit
# 0), its trace columns judged by their declaration (trace_columns.json,
# resumecheck.trace.TraceWriter exact=/noisy=) or by the defaults; judged
# byte for byte the same trainer fails A/A (exit 2: the noise is real).
# Negative controls, each with the verdict's words: Adam's moments lost on
# load exceed the noise (exit 1, no census to see it); the data position
# lost fails the exact column consumed_samples at once (exit 1); gradient
# noise larger than the gradient is too large to decide (exit 4, with what
# would make it decidable; 125 with --git-bisect; control: the same trainer
# without it passes); a learning rate that differs between fresh processes
# fails A/A (exit 2); a deviation at the noise's floor is not decided (exit
# 4; control: 8x the floor exceeds); an excess in one resume leg of two is
# not reproduced, not decided (exit 4; control: in both, or --resumes 1, it
# exceeds); an excess in both first resume legs runs 4 confirming ones,
# and one they do not show is not decided (control: --confirm-resumes 0).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy
NP="'$PY' '$RC_SRC/tests/trainers/noisy_numpy_trainer.py' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
cal() { # NAME TRAINER-FLAGS [RUN-FLAGS...]
  local name=$1 extra=$2
  shift 2
  run_rc "$name" --trainer exec --train-cmd "$NP $extra" --steps 10 --save-at 5 --out "$T/$name" \
    --jobs 2 --progress off --noise calibrated "$@"
}

cal clean "--declare"
expect_rc 0 "correct, declared columns" clean
json_true "$T/clean/report.json" "d['verdict'] == 'within-noise'" "correct: within-noise"
json_true "$T/clean/report.json" \
  "any(c['status'] == 'noise-measured' for c in d['checks'] if c['judged'] == 'noise')" \
  "the fresh legs differ (noise measured)"
json_true "$T/clean/report.json" \
  "[k['why'] for c in d['checks'] if c['name'] == 'TRACE resume@5' for k in c['calibration']['columns']] == ['declared'] * 4" \
  "the columns' kinds come from trace_columns.json"
[ -f "$T/clean/through/trace_columns.json" ] || fail "TraceWriter(exact=, noisy=) wrote no trace_columns.json"
cal defaults ""
expect_rc 0 "correct, default column kinds" defaults
json_true "$T/defaults/report.json" \
  "{k['name']: (k['kind'], k['why']) for c in d['checks'] if c['name'] == 'TRACE resume@5' for k in c['calibration']['columns']} == {'loss': ('noisy', 'float'), 'grad_norm': ('noisy', 'float'), 'lr': ('exact', 'learning rate'), 'consumed_samples': ('exact', 'integer')}" \
  "default kinds: lr and integers exact, floats noisy"
[ -f "$T/defaults/through/trace_columns.json" ] && fail "a trainer that declares nothing wrote trace_columns.json"
# control: byte for byte, the same trainer fails A/A
run_rc bytes --trainer exec --train-cmd "$NP" --steps 10 --save-at 5 --aa --out "$T/bytes" --jobs 2 \
  --progress off
expect_rc 2 "the same trainer judged byte for byte" bytes

cal optim "--bug optimizer-not-saved"
expect_rc 1 "optimizer-not-saved" optim
contains "$T/optim.out" "RESUME exceeds run-to-run noise by"
json_true "$T/optim/report.json" "d['verdict'] == 'exceeds-noise' and d['first_divergence']['step'] in (6, 7)" \
  "moments lost: exceeds at K+1 or K+2"
cal data "--bug data-not-saved"
expect_rc 1 "data-not-saved" data
contains "$T/data.out" "RESUME diverged at step 6: consumed_samples differs"

cal loud "--sgd --noise-scale 10"
expect_rc 4 "gradient noise larger than the gradient" loud
contains "$T/loud.out" "inconclusive: the noise is too large to decide"
contains "$T/loud.out" "hint: to decide: an earlier K"
json_true "$T/loud/report.json" "d['verdict'] == 'noise-inconclusive' and d['exit_code'] == 4" \
  "noise-inconclusive, exit 4"
cal loud_bisect "--sgd --noise-scale 10" --git-bisect
expect_rc 125 "noise too large, --git-bisect" loud_bisect

# at the floor: the fresh runs differ in float32's last bits (far under
# the floor), the resumed leg's loss 2x the floor (2^-14) off: not decided
# (exit 4, "at the floor", the step and column named); control: 8x the
# floor exceeds the noise (exit 1)
cal floor "--declare --loss-nudge 0.0001220703125"
expect_rc 4 "a deviation at the floor" floor
contains "$T/floor.out" "inconclusive: at the floor: loss at step 6 is 2 x the smallest deviation the check resolves"
contains "$T/floor.out" "hint: to decide: more fresh runs (--aa M"
json_true "$T/floor/report.json" "d['verdict'] == 'noise-inconclusive' and [c['calibration']['at_floor'] for c in d['checks'] if c['name'] == 'TRACE resume@5'] == [True]" \
  "at_floor in report.json"
json_true "$T/floor/report.json" "[k['floor_step'] for c in d['checks'] if c['name'] == 'TRACE resume@5' for k in c['calibration']['columns'] if k['name'] == 'loss'] == [6]" \
  "the loss column's floor_step"
cal over_floor "--declare --loss-nudge 0.00048828125"
expect_rc 1 "control: 8x the floor" over_floor
contains "$T/over_floor.out" "RESUME exceeds run-to-run noise by"

# reproduced: each resume leg at K is judged against the fresh leg whose
# checkpoint it loaded; one process off by 8x the floor (as a rounding flip
# makes one) is not reproduced by the other resume leg: not decided (exit
# 4, both legs named); either leg alone; control: the same excess in every
# resume leg exceeds (over_floor above), and with --resumes 1 one leg decides
cal flip "--declare --loss-nudge 0.00048828125 --nudge-from through"
expect_rc 4 "one resume leg of two off" flip
contains "$T/flip.out" "inconclusive: not reproduced: resume@5 against through exceeds run-to-run noise by"
contains "$T/flip.out" "not every resume leg at 5 does (1 of 2); resume@5.aa against aa does not"
contains "$T/flip.out" "hint: to decide: run again"
json_true "$T/flip/report.json" \
  "d['verdict'] == 'noise-inconclusive' and [(c['status'], c['calibration']['not_reproduced'], c['calibration']['resume_legs_exceeding'], c['calibration']['resume_legs']) for c in d['checks'] if c['name'] in ('TRACE resume@5', 'TRACE resume@5.aa')] == [('inconclusive', True, 1, 2), ('within-noise', False, 1, 2)]" \
  "report.json: the excess not reproduced, the other leg within"
cal flip_aa "--declare --loss-nudge 0.00048828125 --nudge-from aa"
expect_rc 4 "the other resume leg off" flip_aa
contains "$T/flip_aa.out" "inconclusive: not reproduced: resume@5.aa against aa exceeds"
cal flip_bisect "--declare --loss-nudge 0.00048828125 --nudge-from through" --git-bisect
expect_rc 125 "not reproduced, --git-bisect" flip_bisect
cal flip_one "--declare --loss-nudge 0.00048828125 --nudge-from through" --resumes 1
expect_rc 1 "control: --resumes 1, one leg decides" flip_one
json_true "$T/flip_one/report.json" "d['config']['resumes'] == 1 and not any('.aa' in l['label'] for l in d['legs'])" \
  "--resumes 1: one resume leg"
json_true "$T/over_floor/report.json" \
  "d['config']['resumes'] == 2 and [c['calibration']['resume_legs_exceeding'] for c in d['checks'] if c['name'] == 'TRACE resume@5'] == [6]" \
  "over_floor: every resume leg exceeds (2, then 4 confirming)"
# confirming: both first resume legs off (a flip all the fresh legs missed
# could do that) but the 4 confirming resume legs at 5 not: not reproduced
# (exit 4, "2 of 6"); control: --confirm-resumes 0 decides on the first two
# (exit 1); over_floor above, every resume leg off, exceeds with all 6
cal confirm "--declare --loss-nudge 0.00048828125 --nudge-legs resume@5,resume@5.aa"
expect_rc 4 "the first two resume legs off, the confirming ones not" confirm
contains "$T/confirm.out" "inconclusive: not reproduced: resume@5 against through exceeds"
contains "$T/confirm.out" "(2 of 6)"
json_true "$T/confirm/report.json" \
  "sorted(l['label'] for l in d['legs'] if l['confirming']) == ['resume@5.2', 'resume@5.3', 'resume@5.aa.2', 'resume@5.aa.3'] and d['config']['confirm_resumes'] == 4" \
  "4 confirming resume legs, from through and aa in turn"
json_true "$T/confirm/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'TRACE resume@5.aa.3'] == ['within-noise'] and [l['depends_on'] for l in d['legs'] if l['label'] == 'resume@5.aa.3'] == ['aa']" \
  "a confirming leg from aa, judged against aa"
cal confirm_off "--declare --loss-nudge 0.00048828125 --nudge-legs resume@5,resume@5.aa" \
  --confirm-resumes 0
expect_rc 1 "control: --confirm-resumes 0" confirm_off
json_true "$T/confirm_off/report.json" "not any(l['confirming'] for l in d['legs'])" "no confirming leg"
json_true "$T/over_floor/report.json" "sum(l['confirming'] for l in d['legs']) == 4" \
  "over_floor: confirmed by 4 more legs"
contains "$T/over_floor.out" "reproduced: all 6 resume legs at 5 exceed it"
json_true "$T/clean/report.json" "not any(l['confirming'] for l in d['legs'])" \
  "a correct run: no confirming leg"
run_rc confirm_bytes --trainer exec --train-cmd "$NP" --steps 10 --save-at 5 \
  --out "$T/confirm_bytes" --confirm-resumes 2
expect_rc 64 "--confirm-resumes byte for byte" confirm_bytes
run_rc resumes_aa --trainer exec --train-cmd "$NP" --steps 10 --save-at 5 --out "$T/resumes_aa" \
  --noise calibrated --resumes 4
expect_rc 64 "--resumes 4 with two aa legs" resumes_aa
contains "$T/resumes_aa.err" "--resumes 4 needs --aa 3 or more"
run_rc resumes_bytes --trainer exec --train-cmd "$NP" --steps 10 --save-at 5 --out "$T/resumes_bytes" \
  --resumes 2
expect_rc 64 "--resumes byte for byte" resumes_bytes

cal jitter "--lr-jitter"
expect_rc 2 "a learning rate that differs between fresh processes" jitter
contains "$T/jitter.out" "two fresh processes differ where no run-to-run noise may"
finish
