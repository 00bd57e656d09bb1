#!/usr/bin/env bash
# py_exec_torch.sh — examples/torch_train.py (the Python package's PyTorch
# trainer) through `resumecheck run --trainer exec` on the CPU: identical
# when correct (exit 0: shards byte-identical, traces and census equal);
# with --bug optimizer-not-saved the resume diverges (exit 1) and the report
# names the Adam moment datasets (/optimizer/exp_avg/...) and, from the
# census, the fields. The correct run is the negative control of the bug
# run and the other way round, and of py_exec_stateful's bugs: the EMA is
# saved, and the first-step census files of through and resume@3 are the same.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch

run_rc ok --trainer exec --train-cmd "$(py_tmpl)" --steps 6 --save-at 3 --out "$T/ok" --progress off
expect_rc 0 "correct PyTorch trainer" ok
contains "$T/ok.out" "A/A identical (through@3 vs save@3: 1/1 shards byte-identical"
contains "$T/ok.out" "RESUME identical (through@6 vs resume@3→6: 1/1 shards byte-identical"
grep -Eq "TRACE resume@3 +identical +through vs resume@3: steps 4..6 identical" "$T/ok.out" || fail "ok: trace of resume@3 not identical"
grep -Eq "CENSUS resume@3 +identical" "$T/ok.out" || fail "ok: census not identical"
json_true "$T/ok/report.json" "d['verdict'] == 'identical' and d['exit_code'] == 0" "ok verdict"
for f in through/ckpt/iter_0000006 resume@3/ckpt/iter_0000006; do
  [ -f "$T/ok/$f/COMPLETE" ] && [ -f "$T/ok/$f/manifest.json" ] && [ -f "$T/ok/$f/shard_00000_of_00001.h5" ] ||
    fail "ok: $f lacks COMPLETE, manifest.json or its shard"
done
# every registered object is saved and censused: the EMA too
grep -qF '"path":"/state/ema/module/fc1/weight"' "$T/ok/through/ckpt/iter_0000003/manifest.json" ||
  fail "ok: the EMA is not in the checkpoint"
contains "$T/ok/through/census/iter_0000003.rank0.txt" "state.ema.module.fc1.weight	saved	fp="
# the first-step census (just before step 4's first forward) in the legs that
# train step 4, the same in both: the control of py_exec_stateful's
# loader-rng-after-load (the save leg stops at 3 and writes none)
F=census/iter_0000003.rank0.first-step.txt
for leg in through resume@3; do
  [ -f "$T/ok/$leg/$F" ] || fail "ok: $leg wrote no $F"
done
[ ! -e "$T/ok/save/$F" ] || fail "ok: the save leg wrote $F"
contains "$T/ok/through/$F" "state.sampler.consumed_samples	saved	64"
contains "$T/ok/through/$F" "rng.torch_cpu	saved	fp="
[ -z "$(census_diff "$T/ok/through/$F" "$T/ok/resume@3/$F")" ] || fail "ok: first-step census differs: $(census_diff "$T/ok/through/$F" "$T/ok/resume@3/$F")"
# the manifest is one `compare` reads: the shard verified against it
"$RC_BIN" compare "$T/ok/through/ckpt/iter_0000006" "$T/ok/resume@3/ckpt/iter_0000006" >"$T/cmp.out" 2>&1 ||
  fail "compare of the two iter_0000006: exit $?"
contains "$T/cmp.out" "verified against manifests"

run_rc bug --trainer exec --train-cmd "$(py_tmpl --bug optimizer-not-saved)" --steps 6 --save-at 3 --out "$T/bug" --progress off
expect_rc 1 "optimizer not restored" bug
contains "$T/bug.out" "A/A identical (through@3 vs save@3"
contains "$T/bug.out" "verdict: RESUME DIVERGED (exit 1"
grep -Eq "RESUME@3→6 +DIFFERS" "$T/bug.out" || fail "bug: RESUME@3→6 does not differ"
contains "$T/bug.out" "optimizer.exp_avg.fc1.weight: only through has it"
R="$T/bug/report.json"
json_true "$R" "d['verdict'] == 'resume-diverged' and d['exit_code'] == 1" "bug verdict"
json_true "$R" "any(x['object'] == '/optimizer/exp_avg/fc1/weight' and x['kind'] == 'values' for c in d['checks'] if c['state'] for x in c['state']['diffs'])" "exp_avg named in the diffs"
json_true "$R" "'optimizer.exp_avg' in d['census_finding']" "census finding names exp_avg"
finish
