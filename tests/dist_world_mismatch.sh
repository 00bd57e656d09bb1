#!/usr/bin/env bash
# dist_world_mismatch.sh — a checkpoint saved with W=2 refuses to load with
# W=3 (exit 65, both sizes named) and loads with W=2 (the control).
source "$(dirname "$0")/dist_lib.sh"
need_mpi

F=(--preset tiny --steps 4)
"$RC_BIN" train "${F[@]}" --world-size 2 --save-at 2 --out "$T/s2" >"$T/s2.out" 2>&1 || fail "W=2 save leg failed"
CK="$T/s2/ckpt/iter_0000002"
"$RC_BIN" train "${F[@]}" --world-size 3 --resume-from "$CK" --out "$T/r3" >"$T/r3.out" 2>&1
rc=$?
[ $rc = 65 ] || fail "W=3 resume of a W=2 checkpoint: exit $rc, want 65"
contains "$T/r3.out" "world size mismatch: the checkpoint was saved with world size 2, this run has 3"
[ -e "$T/r3/ckpt" ] && fail "the failed load wrote checkpoints"
"$RC_BIN" train "${F[@]}" --world-size 2 --resume-from "$CK" --out "$T/r2" >"$T/r2.out" 2>&1 ||
  fail "W=2 resume of a W=2 checkpoint failed: $(cat "$T/r2.out")"
finish
