#!/usr/bin/env bash
# noise_exec_torch.sh — a PyTorch trainer that is not bitwise deterministic
# (tests/trainers/noisy_torch_trainer.py: the microbatches' gradients summed
# in an order drawn per process, as an all-reduce without a pinned
# algorithm does) through `run --trainer exec --noise calibrated`: correct,
# within run-to-run noise, its A/A pairs really differing; the planted bugs
# of the adapter's example fail on exact checks, whatever the noise: the LR
# schedule (the exact column lr, at the step after the first resumed one,
# where the fresh scheduler first steps), the optimizer (the census at K,
# and the exact column lr its fresh param_groups carry), the RNG (the
# census's rng fields), the sampler (the exact columns consumed_samples and
# batch, and the census).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch
TT="'$PY' '$RC_SRC/tests/trainers/noisy_torch_trainer.py' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
cal() { # NAME TRAINER-FLAGS
  run_rc "$1" --trainer exec --train-cmd "$TT $2" --steps 6 --save-at 3 --out "$T/$1" --jobs 2 \
    --progress off --noise calibrated
}
cal clean ""
expect_rc 0 "correct" clean
json_true "$T/clean/report.json" "d['verdict'] == 'within-noise'" "correct: within-noise"
json_true "$T/clean/report.json" \
  "any(c['status'] == 'noise-measured' for c in d['checks'] if c['judged'] == 'noise')" \
  "the fresh legs differ (noise measured)"
json_true "$T/clean/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'CENSUS resume@3'] == ['identical']" \
  "the census at K is compared exactly, and agrees"
cal sched "--bug scheduler-not-restored"
expect_rc 1 "scheduler-not-restored" sched
contains "$T/sched.out" "RESUME diverged at step 5: lr differs"
cal optim "--bug optimizer-not-saved"
expect_rc 1 "optimizer-not-saved" optim
contains "$T/optim.out" "RESUME diverged at step 4: lr differs"
json_true "$T/optim/report.json" \
  "any(x['field'].startswith('optimizer.') for c in d['checks'] if c['name'] == 'CENSUS resume@3' for x in c['census']['differences'])" \
  "the census names the optimizer"
cal rng "--bug rng-not-restored"
expect_rc 1 "rng-not-restored" rng
json_true "$T/rng/report.json" \
  "any(x['field'].startswith('rng.') for c in d['checks'] if c['name'] == 'CENSUS resume@3' for x in c['census']['differences'])" \
  "the census names an RNG"
cal sampler "--bug sampler-not-restored"
expect_rc 1 "sampler-not-restored" sampler
json_true "$T/sampler/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'TRACE resume@3 exact'] == ['differs']" \
  "the exact columns (consumed_samples, batch) differ"
finish
