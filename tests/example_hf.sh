#!/usr/bin/env bash
# example_hf.sh — examples/hf_trainer_layout.py (a plain loop writing the
# Hugging Face Trainer's checkpoint files: model.safetensors, optimizer.pt,
# scheduler.pt, scaler.pt, rng_state.pth, trainer_state.json,
# training_args.bin) through `resumecheck run --trainer exec`,
# --steps 6 --save-at 3: the save falls inside an accumulation window of 2
# microbatches and in the middle of an epoch of 5.
#
# - correct: exit 0, every file byte-identical but training_args.bin (the
#   leg's paths: differs by construction). The negative control of every bug
#   below: none of their causes is in its report, and the fields they name
#   are compared and equal.
# - --bug grad-scaler-not-saved: exit 1; scaler.pt in neither leg, the census
#   names state.scaler.scale alone.
# - --bug loader-rng-after-load: exit 1; the census after the load is clean,
#   the one before the first step names rng.torch_cpu alone (changed between
#   the load and the first step); the checkpoint comparison puts the torch
#   generator in rng_state.pth first. That file holds numpy's generator (a
#   pickled array): compare-torch loads it (its numpy allowlist) and names
#   `cpu` alone; with the allowlist off (RC_PY_TEST_NO_NUMPY_ARRAYS=1, the
#   control) it is refused, 65, as before.
# - --bug accum-counter-reset: exit 1; the census names
#   state.grad_accum.microbatches alone; the update of step 4 is missing
#   (grad_norm differs there, the loss does not).
source "$(dirname "$0")/example_lib.sh"
need_py_modules numpy h5py torch safetensors
S=hf_trainer_layout.py
args=(--trainer exec --steps 6 --save-at 3)
start_run good "${args[@]}" --train-cmd "$(ex_tmpl $S 1)"
start_run scaler "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug grad-scaler-not-saved)"
start_run loader "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug loader-rng-after-load)"
start_run accum "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug accum-counter-reset)"
wait

# correct
expect_run good 0 "correct"
for f in model.safetensors optimizer.pt scheduler.pt scaler.pt rng_state.pth trainer_state.json training_args.bin grad_accum.pt COMPLETE; do
  [ -f "$T/good/resume@3/ckpt/iter_0000006/$f" ] || fail "good: resume@3's iter_0000006 lacks $f"
done
contains "$T/good.out" "RESUME identical (through@6 vs resume@3→6: 8/8 files byte-identical)"
report_true good "d['verdict'] == 'identical' and all(c['status'] == 'identical' for c in d['checks'])" "every check identical"
report_true good "[(x['file'], x['kind']) for x in check('state', 'RESUME')['state']['diffs']] == [('training_args.bin', 'informational')]" \
  "training_args.bin differs by construction, nothing else differs"
cmp -s "$T/good/through/ckpt/iter_0000006/training_args.bin" "$T/good/resume@3/ckpt/iter_0000006/training_args.bin" &&
  fail "good: training_args.bin is the same in both legs: nothing shows it is run-specific"
report_true good "census(d) == [] and first_step(d) == []" "no census difference"
"$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if s["global_step"] == 1 and len(s["log_history"]) == 1 else 1)' \
  "$T/good/through/ckpt/iter_0000003/trainer_state.json" || fail "good: trainer_state.json at 3 is not one update in"
C=census/iter_0000003.rank0
for field in state.scaler.scale state.grad_accum.microbatches rng.torch_cpu; do
  for phase in "" .first-step; do
    a=$(census_value "$T/good/through/$C$phase.txt" "$field")
    b=$(census_value "$T/good/resume@3/$C$phase.txt" "$field")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "good: $field$phase through '$a', resumed '$b'"
  done
done
[ "$(census_value "$T/good/through/$C.txt" state.grad_accum.microbatches)" = 1 ] || fail "good: the save is not inside a window"

# grad-scaler-not-saved
expect_run scaler 1 "grad scaler not saved"
[ -f "$T/scaler/through/ckpt/iter_0000003/scaler.pt" ] && fail "scaler: scaler.pt was written"
report_true scaler "census(d) == ['state.scaler.scale'] and 'state.scaler.scale: through 2048, resumed 1024' in d['census_finding']" \
  "the census names the loss scale alone"
report_true scaler "'loss_scale' in trace(d)['columns'] and trace(d)['first_step'] == 4" "the loss scale diverges at step 4"

# loader-rng-after-load
expect_run loader 1 "the loader's iterator made after the RNG was restored"
report_true loader "census(d) == [] and first_step(d) == ['rng.torch_cpu']" "clean after the load, rng.torch_cpu before the first step"
report_true loader "check('census', 'CENSUS')['census']['first_step']['differences'][0]['after_load'] == 'equal'" "it changed after the load"
report_true loader "trace(d)['first_step'] == 4 and 'loss' in trace(d)['columns']" "the loss diverges at step 4"
report_true loader "check('state', 'RESUME')['state']['headline_difference'].startswith('cpu in rng_state.pth')" "the headline is the torch generator"
A="$T/loader/through/ckpt/iter_0000006/rng_state.pth" B="$T/loader/resume@3/ckpt/iter_0000006/rng_state.pth"
"$PY" -m resumecheck compare-torch "$A" "$B" --json "$T/rng.json" --resumecheck "$RC_BIN" >"$T/rng.out" 2>"$T/rng.err"
rc=$?
expect_rc 1 "compare-torch of rng_state.pth (numpy's generator inside)" rng
json_true "$T/rng.json" "[x['object'] for x in d['diffs'] if x['failing']] == ['cpu']" "rng_state.pth: cpu differs, numpy and python equal"
RC_PY_TEST_NO_NUMPY_ARRAYS=1 "$PY" -m resumecheck compare-torch "$A" "$B" --resumecheck "$RC_BIN" >"$T/rng_off.out" 2>"$T/rng_off.err"
rc=$?
expect_rc 65 "control: numpy arrays refused as before" rng_off
contains "$T/rng_off.err" "multiarray._reconstruct"

# accum-counter-reset
expect_run accum 1 "accumulation counter reset"
report_true accum "census(d) == ['state.grad_accum.microbatches'] and 'state.grad_accum.microbatches: through 1, resumed 0' in d['census_finding']" \
  "the census names the window's counter alone"
report_true accum "trace(d)['first_step'] == 4 and trace(d)['columns'] == ['grad_norm']" "step 4's update missing: grad_norm differs, the loss does not"
finish
