#!/usr/bin/env bash
# py_exec_rng.sh — examples/torch_train.py with --bug rng-not-restored
# through `resumecheck run --trainer exec`: the resumed process keeps the
# RNG states its own seeding gave it, so the dropout masks, input noise and
# label smoothing of step 4 differ: RESUME diverges at step 4 with the loss
# differing (exit 1), and the census names the generators (rng.torch_cpu,
# rng.numpy, rng.python), after the load and before step 4's first forward.
# Control: py_exec_torch's correct run (exit 0, the same first-step census).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch

run_rc rng --trainer exec --train-cmd "$(py_tmpl --bug rng-not-restored)" --steps 5 --save-at 3 --out "$T/rng" --progress off
expect_rc 1 "RNG not restored" rng
contains "$T/rng.out" "RESUME diverged at step 4: loss"
R="$T/rng/report.json"
json_true "$R" "d['first_divergence']['step'] == 4 and 'loss' in d['first_divergence']['columns']" "first divergence"
json_true "$R" "[x['field'] for c in d['checks'] if c['census'] for x in c['census']['differences']] == ['rng.torch_cpu', 'rng.numpy', 'rng.python']" "census names exactly the generators"
contains "$T/rng.out" "rng.torch_cpu: through fp="
json_true "$R" "any(x['object'] == '/rng/torch_cpu' for c in d['checks'] if c['state'] for x in c['state']['diffs'])" "/rng/torch_cpu in the diffs"
# the first-step census (before step 4's first forward) names them too
F=census/iter_0000003.rank0.first-step.txt
[ "$(census_diff "$T/rng/through/$F" "$T/rng/resume@3/$F" | tr '\n' ' ')" = "rng.torch_cpu rng.numpy rng.python " ] ||
  fail "rng: the first-step census should differ in the generators: $(census_diff "$T/rng/through/$F" "$T/rng/resume@3/$F" | tr '\n' ' ')"
finish
