#!/usr/bin/env bash
# py_exec_stateful.sh — examples/torch_train.py's registered-state bugs
# through `resumecheck run --trainer exec`:
# - --bug ema-not-saved: the EMA of the weights is updated every step and
#   censused, but not in the checkpoint. Every step's loss and every shard
#   agree (the EMA is in none); the census after the load names the EMA's
#   fields, and the run fails (exit 1).
# - --bug loader-rng-after-load: a resumed leg makes its DataLoader iterator
#   after the load, and the iterator draws its base seed from the restored
#   torch RNG. The census right after the load is clean; the first-step
#   census (just before step 4's first forward) differs in rng.torch_cpu
#   and nothing else, and the loss diverges at step 4 (exit 1).
# Control: py_exec_torch's correct run (exit 0, the EMA saved, the
# first-step census files of through and resume@3 the same).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch

run_rc ema --trainer exec --train-cmd "$(py_tmpl --bug ema-not-saved)" --steps 6 --save-at 3 --out "$T/ema" --progress off
expect_rc 1 "EMA not saved" ema
grep -Eq "TRACE resume@3 +identical" "$T/ema.out" || fail "ema: the trace should not see the EMA"
grep -Eq "RESUME@3→6 +identical" "$T/ema.out" || fail "ema: the shards should not see the EMA (it is in none)"
grep -Eq "CENSUS resume@3 +DIFFERS" "$T/ema.out" || fail "ema: CENSUS resume@3 does not differ"
contains "$T/ema.out" "state.ema.module.fc1.weight: through fp="
R="$T/ema/report.json"
json_true "$R" "d['verdict'] == 'resume-diverged' and d['exit_code'] == 1" "ema verdict"
json_true "$R" "sorted(x['field'] for c in d['checks'] if c['census'] for x in c['census']['differences']) == ['state.ema.module.fc1.bias', 'state.ema.module.fc1.weight', 'state.ema.module.fc2.bias', 'state.ema.module.fc2.weight', 'state.ema.n_averaged']" "census names exactly the EMA's fields"
json_true "$R" "'state.ema' in d['census_finding']" "census finding names the EMA"
if grep -qF '/state/ema' "$T/ema/through/ckpt/iter_0000003/manifest.json"; then fail "ema: the EMA was saved"; fi
json_true "$R" "sorted(x['field'] for c in d['checks'] if c['census'] for x in c['census']['first_step']['differences']) == ['state.ema.module.fc1.bias', 'state.ema.module.fc1.weight', 'state.ema.module.fc2.bias', 'state.ema.module.fc2.weight', 'state.ema.n_averaged']" "ema: run's first-step census names the EMA's fields"
F=census/iter_0000003.rank0.first-step.txt
[ "$(census_diff "$T/ema/through/$F" "$T/ema/resume@3/$F" | tr '\n' ' ')" = "state.ema.n_averaged state.ema.module.fc1.weight state.ema.module.fc1.bias state.ema.module.fc2.weight state.ema.module.fc2.bias " ] ||
  fail "ema: the first-step census should differ in the EMA's fields: $(census_diff "$T/ema/through/$F" "$T/ema/resume@3/$F" | tr '\n' ' ')"

run_rc loader --trainer exec --train-cmd "$(py_tmpl --bug loader-rng-after-load)" --steps 6 --save-at 3 --out "$T/loader" --progress off
expect_rc 1 "DataLoader iterator made after the load" loader
contains "$T/loader.out" "RESUME diverged at step 4: loss"
# the census right after the load does not see it ...
json_true "$T/loader/report.json" "[c['census']['differences'] for c in d['checks'] if c['census']] == [[]]" "loader: the census after the load should be identical"
[ -z "$(census_diff "$T/loader/through/census/iter_0000003.rank0.txt" "$T/loader/resume@3/census/iter_0000003.rank0.txt")" ] ||
  fail "loader: the after-save and after-load census files differ"
# ... the one just before the first forward does: the torch generator, only
for leg in through resume@3; do
  [ -f "$T/loader/$leg/$F" ] || fail "loader: $leg wrote no $F"
done
[ "$(census_diff "$T/loader/through/$F" "$T/loader/resume@3/$F")" = "rng.torch_cpu" ] ||
  fail "loader: the first-step census should differ in rng.torch_cpu only: $(census_diff "$T/loader/through/$F" "$T/loader/resume@3/$F" | tr '\n' ' ')"
# ... and run says so: the first-step census's one difference, equal after the load
json_true "$T/loader/report.json" \
  "[(x['field'], x.get('after_load')) for c in d['checks'] if c['census'] for x in c['census']['first_step']['differences']] == [('rng.torch_cpu', 'equal')]" \
  "loader: report.json's first-step census names rng.torch_cpu alone, equal after the load"
json_true "$T/loader/report.json" "'before the first step' in d['census_finding']" "loader: the census finding says which census saw it"
contains "$T/loader.out" "before the first step"
finish
