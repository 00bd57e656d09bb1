#!/usr/bin/env bash
# gpu_noise_torch.sh — a PyTorch trainer whose GPU kernels are not bitwise
# deterministic by nature (tests/trainers/gpu_torch_trainer.py: a small GPT,
# the embedding backward by index_add_'s atomics, SDPA's backward under bf16
# autocast; nothing planted) through `run --trainer exec --noise calibrated`
# (docs/exec-trainer.md, "Trainers that are not deterministic"). Skips (77)
# unless torch imports and sees a GPU: gpu_noise.sh tests the core's own
# switch; this is the noise of kernels PyTorch picks.
#   - control: judged byte for byte, two fresh legs differ (exit 2): the
#     noise is the device's, or the rest would prove nothing;
#   - a correct trainer passes within run-to-run noise (exit 0);
#   - a planted resume bug is caught exactly whatever the noise (exit 1):
#     the optimizer left fresh (the census names it), every RNG left as
#     seeded (the census names the CUDA generator, which dropout advances).
source "$(dirname "$0")/run_lib.sh"
PY="${RC_PYTHON:-python3}"
export PYTHONPATH="$RC_SRC/python${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import sys, numpy, h5py, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1 ||
  { echo "skip: torch with a usable GPU (and numpy, h5py) not importable by '$PY'"; exit 77; }
TT="'$PY' '$RC_SRC/tests/trainers/gpu_torch_trainer.py' --device cuda --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
leg() { # NAME TRAINER-FLAGS RUN-FLAGS...
  local name=$1 flags=$2
  shift 2
  run_rc "$name" --trainer exec --train-cmd "$TT $flags" --steps 8 --save-at 4 --out "$T/$name" \
    --progress off --leg-timeout 240 "$@"
}
leg bytes "" --aa
expect_rc 2 "control: the clean trainer judged byte for byte (two fresh legs on the GPU differ)" bytes
leg clean "" --noise calibrated
expect_rc 0 "the clean trainer under --noise calibrated" clean
json_true "$T/clean/report.json" "d['verdict'] == 'within-noise'" "within-noise"
json_true "$T/clean/report.json" \
  "any(c['judged'] == 'noise' and c['status'] == 'noise-measured' for c in d['checks'])" \
  "the fresh legs differ (noise measured)"
json_true "$T/clean/report.json" \
  "[c['status'] for c in d['checks'] if c['name'] == 'CENSUS resume@4'] == ['identical']" \
  "the census at K is compared exactly, and agrees"
leg optim "--bug optimizer-not-saved" --noise calibrated
expect_rc 1 "optimizer-not-saved" optim
json_true "$T/optim/report.json" \
  "any(x['field'].startswith('optimizer.') for c in d['checks'] if c['name'] == 'CENSUS resume@4' for x in c['census']['differences'])" \
  "the census names the optimizer"
leg rng "--bug rng-not-restored" --noise calibrated
expect_rc 1 "rng-not-restored" rng
json_true "$T/rng/report.json" \
  "any(x['field'].startswith('rng.torch_cuda') for c in d['checks'] if c['name'] == 'CENSUS resume@4' for x in c['census']['differences'])" \
  "the census names the CUDA generator"
finish
