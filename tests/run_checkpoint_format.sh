#!/usr/bin/env bash
# run_checkpoint_format.sh — `--checkpoint-format` (run and compare): a
# checkpoint of another format than the one named is an error (65) naming
# the directory and what it lacks, never a pass; auto (the default) takes
# what it finds. The fake trainer writes plain files (no manifest.json, no
# .metadata, no torch.save file). Controls: the same run with auto is
# IDENTICAL; compare of two directories of one format passes it.
source "$(dirname "$0")/run_lib.sh"

run_rc auto --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/auto" --progress off
expect_rc 0 "control: --checkpoint-format auto (the default)" auto
json_true "$T/auto/report.json" "d['config']['checkpoint_format'] == 'auto'" "auto recorded"
for f in resumecheck dcp torch-save; do
  run_rc "$f" --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/$f" --progress off --checkpoint-format "$f"
  expect_rc 65 "plain files under --checkpoint-format $f" "$f"
  contains "$T/$f.out" "ckpt/iter_0000002 (side A): --checkpoint-format $f, but it holds no "
  json_true "$T/$f/report.json" "d['verdict'] == 'error' and d['config']['checkpoint_format'] == '$f'" "$f: error verdict, the format recorded"
done
run_rc bad --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/bad" --progress off --checkpoint-format hdf5
expect_rc 64 "an unknown format" bad

# compare: the same refusal; two directories of the named format pass
"$RC_BIN" compare --checkpoint-format resumecheck "$T/auto/through/ckpt/iter_0000004" "$T/auto/resume@2/ckpt/iter_0000004" >"$T/c1.out" 2>&1
rc=$?
expect_rc 65 "compare: plain files are not resumecheck shards" c1
contains "$T/c1.out" "but it holds no manifest.json"
"$RC_BIN" compare --checkpoint-format auto "$T/auto/through/ckpt/iter_0000004" "$T/auto/resume@2/ckpt/iter_0000004" >"$T/c2.out" 2>&1
rc=$?
expect_rc 0 "control: compare with auto" c2
"$RC_BIN" compare --checkpoint-format dcp "$T/auto/through/ckpt/iter_0000004/weights.txt" "$T/auto/resume@2/ckpt/iter_0000004/weights.txt" >"$T/c3.out" 2>&1
rc=$?
expect_rc 65 "compare: a file is no DCP checkpoint" c3
contains "$T/c3.out" "a torch.distributed.checkpoint is a directory"
finish
