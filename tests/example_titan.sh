#!/usr/bin/env bash
# example_titan.sh — examples/titan_train.py (TorchTitan style: FSDP2 on
# gloo, a dict of Stateful objects saved with torch.distributed.checkpoint,
# the same dict censused) through `resumecheck run --trainer exec`,
# --steps 4 --save-at 2 (an epoch ends inside step 4 on 2 ranks).
#
# - correct, 2 ranks under torchrun: exit 0; every check identical, the DCP
#   checkpoint (a rank file each) equal by content, the census of both
#   ranks compared after the load and before the first step. The negative
#   control of every bug below: none of their causes is in its report, and
#   the fields they name are compared and equal.
# - --bug optimizer-not-loaded (1 rank): exit 1; dcp.load restores the
#   moments in place, the param groups stay fresh: the census names
#   state.app.optim.param_groups.0.lr and nothing else; the loss diverges at 4.
# - --bug ema-not-saved (1 rank): exit 1 with the losses and the checkpoints
#   identical (the EMA is in neither); the census names every EMA tensor.
# - --bug sampler-epoch-restart (2 ranks): exit 1; the census names the
#   data loader's position on each rank, the checkpoint comparison the
#   position in each rank's own file (dataloader/dp_rank_1/... in
#   __1_0.distcp); the loss diverges at 3.
source "$(dirname "$0")/example_lib.sh"
need_py_modules numpy h5py torch torchdata
S=titan_train.py
args=(--trainer exec --steps 4 --save-at 2)
start_run good "${args[@]}" --train-cmd "$(ex_tmpl $S 2)"
start_run opt "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug optimizer-not-loaded)"
start_run ema "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug ema-not-saved)"
start_run sampler "${args[@]}" --train-cmd "$(ex_tmpl $S 2 --bug sampler-epoch-restart)"
wait

# correct
expect_run good 0 "correct, 2 ranks"
contains "$T/good.out" "RESUME identical (through@4 vs resume@2→4:"
contains "$T/good.out" "1/1 PyTorch checkpoint equal by content"
for f in .metadata __0_0.distcp __1_0.distcp COMPLETE; do
  [ -f "$T/good/resume@2/ckpt/iter_0000004/$f" ] || fail "good: resume@2's iter_0000004 lacks $f"
done
report_true good "d['verdict'] == 'identical' and all(c['status'] == 'identical' for c in d['checks'])" "every check identical"
report_true good "check('census', 'CENSUS')['census']['ranks'] == 2 and check('census', 'CENSUS')['census']['first_step']['compared']" \
  "the census of both ranks compared, before the first step too"
report_true good "census(d) == [] and first_step(d) == []" "no census difference"
# what the bugs change is compared and equal here: the optimizer's lr, the
# EMA, the loader's position (rank 1's too), each in the census of both legs
C=census/iter_0000002
for field in state.app.optim.param_groups.0.lr state.ema.shadow.output.weight state.dataloader.dp_rank_0._num_yielded; do
  a=$(census_value "$T/good/through/$C.rank0.txt" "$field")
  b=$(census_value "$T/good/resume@2/$C.rank0.txt" "$field")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "good: $field through '$a', resumed '$b'"
done
[ -n "$(census_value "$T/good/resume@2/$C.rank1.txt" state.dataloader.dp_rank_1._num_yielded)" ] ||
  fail "good: rank 1's census lacks its loader position"

# optimizer-not-loaded
expect_run opt 1 "optimizer not loaded"
report_true opt "census(d) == ['state.app.optim.param_groups.0.lr']" "the census names the optimizer's lr, alone"
report_true opt "trace(d)['first_step'] == 4 and 'loss' in trace(d)['columns']" "the loss diverges at step 4"
report_true opt "d['verdict'] == 'resume-diverged' and 'state.app.optim.param_groups.0.lr' in d['census_finding']" "census finding"
contains "$T/opt.out" "state.app.optim.param_groups.0.lr: through 0.0022500000000000003, resumed 0.0030000000000000001"

# ema-not-saved
expect_run ema 1 "EMA not saved"
grep -Eq "TRACE resume@2 +identical" "$T/ema.out" || fail "ema: the losses should not see the EMA"
grep -Eq "RESUME@2→4 +identical" "$T/ema.out" || fail "ema: the checkpoints should not see the EMA (it is in neither)"
report_true ema "len(census(d)) == 21 and all(f.startswith('state.ema.shadow.') for f in census(d))" "the census names the EMA's 21 tensors, only"
report_true ema "'state.ema.shadow.tok_embeddings.weight' in census(d) and 'state.ema.shadow.tok_embeddings.weight' in d['census_finding']" "the first EMA tensor"
if grep -aq "ema.shadow" "$T/ema/through/ckpt/iter_0000002/.metadata"; then fail "ema: the EMA was saved"; fi
grep -aq "ema.shadow" "$T/good/through/ckpt/iter_0000002/.metadata" || fail "good: the EMA was not saved (control of the line above)"

# sampler-epoch-restart, 2 ranks
expect_run sampler 1 "the loader restarts its epoch"
report_true sampler "census(d) == [f'rank {r}: state.dataloader.dp_rank_{r}.{k}' for r in (0, 1) for k in ('_sampler_iter_state.samples_yielded', '_sampler_iter_yielded', '_num_yielded')]" \
  "the census names each rank's loader position, nothing else"
report_true sampler "{(x['object'], x['file']) for x in state(d) if x['object'].startswith('dataloader/')} >= {('dataloader/dp_rank_0/_num_yielded', '__0_0.distcp'), ('dataloader/dp_rank_1/_num_yielded', '__1_0.distcp')}" \
  "each rank's position named with its own rank file"
report_true sampler "trace(d)['first_step'] == 3" "the loss diverges at step 3"
contains "$T/sampler.out" "first differing dataset: dataloader/dp_rank_0/_num_yielded in __0_0.distcp"
finish
