#!/usr/bin/env bash
# example_megatron.sh — examples/megatron_torch_dist_layout.py (Megatron-LM's
# torch_dist layout: a torch.distributed.checkpoint directory with the model
# and the distributed optimizer's sharded moments, common.pt, metadata.json,
# and the latest_checkpointed_iteration.txt tracker beside the iter_*
# directories) through `resumecheck run --trainer exec`, --steps 4 --save-at 2.
#
# - correct, 2 ranks under torchrun: exit 0; the DCP part equal by content,
#   common.pt and metadata.json byte for byte, the census of both ranks
#   compared. The trackers differ between the legs (the save leg's says 2,
#   the through leg's 4) and are not compared: `run` compares iter_*
#   directories only. The negative control of every bug below: none of
#   their causes is in its report, the fields they name compared and equal.
# - --bug step-off-by-one (1 rank): exit 1; the census names
#   state.train_state.iteration (through 2, resumed 3) alone; the resumed leg
#   skips step 3, so at step 4 even consumed_train_samples differs.
# - --bug scheduler-not-saved (1 rank): exit 1; common.pt has no
#   opt_param_scheduler; the census names its num_steps alone; the lr
#   diverges at step 4 (the scheduler sets the lr after each step).
# - --bug dropout-rng-not-restored (1 rank): exit 1; the census names
#   rng.torch_cpu alone; the loss diverges at step 3; common.pt's rng_state
#   (numpy's generator inside: loaded through compare-torch's numpy
#   allowlist) is compared and its torch generator named.
source "$(dirname "$0")/example_lib.sh"
need_py_modules numpy h5py torch
S=megatron_torch_dist_layout.py
args=(--trainer exec --steps 4 --save-at 2)
start_run good "${args[@]}" --train-cmd "$(ex_tmpl $S 2)"
start_run step "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug step-off-by-one)"
start_run sched "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug scheduler-not-saved)"
start_run rng "${args[@]}" --train-cmd "$(ex_tmpl $S 1 --bug dropout-rng-not-restored)"
wait

# correct
expect_run good 0 "correct, 2 ranks"
for f in .metadata __0_0.distcp __1_0.distcp common.pt metadata.json COMPLETE; do
  [ -f "$T/good/resume@2/ckpt/iter_0000004/$f" ] || fail "good: resume@2's iter_0000004 lacks $f"
done
contains "$T/good.out" "RESUME identical (through@4 vs resume@2→4: 5/5 files byte-identical; 1/1 PyTorch checkpoint equal by content)"
report_true good "d['verdict'] == 'identical' and all(c['status'] == 'identical' for c in d['checks'])" "every check identical"
report_true good "check('census', 'CENSUS')['census']['ranks'] == 2 and census(d) == [] and first_step(d) == []" "both ranks' census, no difference"
# the optimizer's moments are sharded: a slice in each rank's file
"$PY" - "$T/good/through/ckpt/iter_0000004" <<'PY' || fail "good: exp_avg of linear_qkv.weight is not in both rank files"
import sys
from resumecheck import dcp
md = dcp.read_metadata_light(sys.argv[1])
files = {s.relative_path for i, s in md.storage_data.items() if i.fqn == "optimizer.state.exp_avg.decoder.layers.0.self_attention.linear_qkv.weight"}
sys.exit(0 if files == {"__0_0.distcp", "__1_0.distcp"} else 1)
PY
[ "$(cat "$T/good/through/ckpt/latest_checkpointed_iteration.txt")" = 4 ] && [ "$(cat "$T/good/save/ckpt/latest_checkpointed_iteration.txt")" = 2 ] ||
  fail "good: the trackers do not say 4 (through) and 2 (save)"
lacks "$T/good.out" "latest_checkpointed_iteration"
if grep -q latest_checkpointed_iteration "$T/good/report.json"; then fail "good: report.json names the tracker"; fi
C=census/iter_0000002.rank0.txt
for field in state.train_state.iteration state.opt_param_scheduler.num_steps rng.torch_cpu; do
  a=$(census_value "$T/good/through/$C" "$field")
  b=$(census_value "$T/good/resume@2/$C" "$field")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "good: $field through '$a', resumed '$b'"
done

# step-off-by-one
expect_run step 1 "iteration restored as K+1"
report_true step "census(d) == ['state.train_state.iteration'] and 'state.train_state.iteration: through 2, resumed 3' in d['census_finding']" \
  "the census names the iteration alone"
report_true step "trace(d)['first_step'] == 4 and 'consumed_train_samples' in trace(d)['columns']" "step 3 skipped: the data position differs at 4"

# scheduler-not-saved
expect_run sched 1 "opt_param_scheduler not saved"
"$PY" -c 'import sys, torch; c = torch.load(sys.argv[1], weights_only=False); sys.exit("opt_param_scheduler" in c)' \
  "$T/sched/through/ckpt/iter_0000002/common.pt" || fail "sched: common.pt holds opt_param_scheduler"
report_true sched "census(d) == ['state.opt_param_scheduler.num_steps'] and 'state.opt_param_scheduler.num_steps: through 16, resumed 0' in d['census_finding']" \
  "the census names the scheduler's position alone"
report_true sched "trace(d)['first_step'] == 4 and trace(d)['columns'] == ['lr']" "the lr diverges at step 4, nothing else"

# dropout-rng-not-restored
expect_run rng 1 "torch generator not restored"
report_true rng "census(d) == ['rng.torch_cpu']" "the census names the torch generator alone"
report_true rng "trace(d)['first_step'] == 3 and 'loss' in trace(d)['columns']" "the loss diverges at step 3"
report_true rng "('rng_state/0/torch_rng_state', 'common.pt') in [(x['object'], x['file']) for x in state(d)]" \
  "common.pt's torch generator named (its numpy generator loaded)"
report_true rng "not [x for x in state(d) if x['object'].startswith('rng_state/0/np_rng_state') or x['object'].startswith('rng_state/0/random_rng_state')]" \
  "the numpy and random generators compared equal"
finish
