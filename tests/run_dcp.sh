#!/usr/bin/env bash
# run_dcp.sh — an exec trainer whose checkpoints are torch.distributed.checkpoint
# directories (tests/trainers/dcp_trainer.py: FSDP2 on gloo under torchrun, a
# rank file each) through `resumecheck run`, and `compare` on what it wrote
# (docs/compare.md, "PyTorch formats"; harness/compare_torch.c).
#
# - 1 rank and 2 ranks, correct: IDENTICAL, the DCP checkpoint equal by
#   content although every leg's .metadata differs by construction (the
#   directory it was saved to, a random save id): the negative control of
#   the checks below.
# - --bug optimizer-not-loaded (2 ranks): RESUME diverged, the Adam moments
#   named with the rank file they sit in.
# - one rank file's tensor bytes changed (the same length, another value):
#   `compare` fails naming the tensor and that rank file; the copy with
#   them unchanged is IDENTICAL.
# - .metadata: another leg's (its own path and ids) is not counted (exit 0);
#   a real change (a tensor's recorded dtype) is (exit 1).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy torch
TR="$RC_SRC/tests/trainers/dcp_trainer.py"
flags="--steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
one="'$PY' '$TR' $flags"
two="'$PY' -m torch.distributed.run --standalone --nproc-per-node 2 '$TR' $flags"

run_rc one --trainer exec --train-cmd "$one" --steps 4 --save-at 2 --out "$T/one" --progress off
expect_rc 0 "1 rank, correct" one
contains "$T/one.out" "RESUME identical (through@4 vs resume@2→4:"
contains "$T/one.out" "1/1 PyTorch checkpoint equal by content"
run_rc two --trainer exec --train-cmd "$two" --steps 4 --save-at 2 --out "$T/two" --progress off
expect_rc 0 "2 ranks, correct" two
contains "$T/two.out" "A/A identical (through@2 vs save@2:"
contains "$T/two.out" "1/1 PyTorch checkpoint equal by content"
[ -f "$T/two/through/ckpt/iter_0000004/__1_0.distcp" ] || fail "2 ranks: no rank 1 file"
cmp -s "$T/two/through/ckpt/iter_0000004/.metadata" "$T/two/resume@2/ckpt/iter_0000004/.metadata" &&
  fail "the legs' .metadata files are byte-identical: nothing shows they are compared by content"
json_true "$T/two/report.json" "d['verdict'] == 'identical'" "2 ranks: report.json verdict"
contains "$T/two.out" "every check identical (PyTorch checkpoints by content, every other file byte for byte)"

run_rc bug --trainer exec --train-cmd "$two --bug optimizer-not-loaded" --steps 4 --save-at 2 --out "$T/bug" --progress off
expect_rc 1 "2 ranks, optimizer not loaded" bug
grep -Eq "RESUME@2→4 +DIFFERS .*0/1 PyTorch checkpoint equal by content" "$T/bug.out" || fail "bug: RESUME@2→4 does not differ by content"
json_true "$T/bug/report.json" \
  "any(x['object'] == 'optim/state/0.weight/exp_avg' and x['file'] == '__0_0.distcp' for c in d['checks'] if c.get('state') for x in c['state']['diffs'])" \
  "bug: exp_avg of rank 0's shard named with __0_0.distcp"
# the headline is optimizer state (the kind a step reads before the weights
# it produces), though model/ sorts first
grep -Eq "first differing dataset: optim/state/" "$T/bug.out" || fail "bug: the headline is not the optimizer state"

# one rank file's bytes: model/2.weight's rows held by rank 1 (FSDP2 shards
# dim 0), one value changed in place
A="$T/two/through/ckpt/iter_0000004"
cp -r "$T/two/resume@2/ckpt/iter_0000004" "$T/flip"
cp -r "$T/two/resume@2/ckpt/iter_0000004" "$T/same"
"$PY" - "$T/flip" <<'PY' || fail "could not change rank 1's bytes"
import io, os, pickle, sys, torch
d = sys.argv[1]
md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
idx, info = next((i, s) for i, s in md.storage_data.items() if i.fqn == "model.2.weight" and s.relative_path == "__1_0.distcp")
with open(os.path.join(d, info.relative_path), "r+b") as f:
    f.seek(info.offset)
    t = torch.load(io.BytesIO(f.read(info.length)), weights_only=True)
    t[1, 3] += 1.0
    b = io.BytesIO()
    torch.save(t, b)
    assert len(b.getvalue()) == info.length
    f.seek(info.offset)
    f.write(b.getvalue())
PY
"$RC_BIN" compare "$A" "$T/flip" --json "$T/flip.json" >"$T/flip.out" 2>&1
rc=$?
expect_rc 1 "one value changed in rank 1's file" flip
contains "$T/flip.out" "model/2.weight"
json_true "$T/flip.json" \
  "[(x['object'], x['file'], x['first_index']) for x in d['diffs'] if x['failing']] == [('model/2.weight', '__1_0.distcp', (4 + 1) * 32 + 3)]" \
  "flip: exactly model/2.weight, in __1_0.distcp, at [5,3]"
"$RC_BIN" compare "$A" "$T/same" >"$T/same.out" 2>&1
rc=$?
expect_rc 0 "control: the unchanged copy" same

# no interpreter to read them with: an error that says so (64), never a pass
RC_PYTHON=/nonexistent/python3 "$RC_BIN" compare "$A" "$T/same" >"$T/nopy.out" 2>&1
rc=$?
expect_rc 64 "no Python to read a DCP directory with" nopy
contains "$T/nopy.out" "comparing it needs Python with torch and the resumecheck package"
# an interpreter without the package (as Python says it, exit 1 and no JSON):
# 64 naming what is missing, not a verdict or a missing-file error
printf '#!/bin/sh\necho "python3: No module named resumecheck" >&2\nexit 1\n' >"$T/nopkg"
chmod +x "$T/nopkg"
RC_PYTHON="$T/nopkg" "$RC_BIN" compare "$A" "$T/same" >"$T/nopkg.out" 2>&1
rc=$?
expect_rc 64 "an interpreter without the resumecheck package" nopkg
contains "$T/nopkg.out" "No module named resumecheck"

# .metadata: another leg's (its path and ids) is no difference; a real change is
cp -r "$A" "$T/meta_leg"
cp "$T/two/resume@2/ckpt/iter_0000004/.metadata" "$T/meta_leg/.metadata"
"$RC_BIN" compare "$A" "$T/meta_leg" >"$T/meta_leg.out" 2>&1
rc=$?
expect_rc 0 ".metadata of another leg (its own checkpoint_id and save_id)" meta_leg
contains "$T/meta_leg.out" "differs by construction"
cp -r "$A" "$T/meta_real"
"$PY" - "$T/meta_real/.metadata" <<'PY' || fail "could not change .metadata"
import pickle, sys, torch
md = pickle.load(open(sys.argv[1], "rb"))
md.state_dict_metadata["model.0.bias"].properties.dtype = torch.float64
pickle.dump(md, open(sys.argv[1], "wb"))
PY
"$RC_BIN" compare "$A" "$T/meta_real" --json "$T/meta_real.json" >"$T/meta_real.out" 2>&1
rc=$?
expect_rc 1 "control: .metadata recording another dtype" meta_real
json_true "$T/meta_real.json" \
  "[(x['kind'], x['object']) for x in d['diffs'] if x['failing']] == [('dtype', 'model/0.bias')]" \
  "meta_real: the dtype difference of model/0.bias, nothing else"
finish
