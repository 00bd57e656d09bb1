#!/usr/bin/env bash
# compare_world_size.sh — `compare` of two resumecheck checkpoints written by
# different world sizes (python/resumecheck checkpoint.save, 2 ranks against
# 1): one line says "2 shards against 1 ... compared by name", rank 0's
# shards are compared dataset by dataset (the replicated weights equal, the
# /meta world size named), and rank 1's shard is reported as that rank's,
# not as an unexplained "file only in A". Control: two saves of one world
# size are IDENTICAL, and with a weight changed, name that weight.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch
"$PY" - "$T" <<'PY' || fail "could not write the checkpoints"
import sys, torch
from resumecheck import checkpoint
t = sys.argv[1]
torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
for root, world in (("w2", 2), ("w2b", 2), ("w1", 1)):
    for r in range(world):
        checkpoint.save(f"{t}/{root}", 5, model=m, data_position={"consumed_samples": 10}, rng=False, rank=r, world_size=world)
    if world > 1:
        checkpoint.finalize(f"{t}/{root}", 5, world)
with torch.no_grad():
    m.weight[1, 2] += 1.0
for r in range(2):
    checkpoint.save(f"{t}/w2c", 5, model=m, data_position={"consumed_samples": 10}, rng=False, rank=r, world_size=2)
checkpoint.finalize(f"{t}/w2c", 5, 2)
PY
"$RC_BIN" compare "$T/w2/iter_0000005" "$T/w1/iter_0000005" --json "$T/ws.json" >"$T/ws.out" 2>&1
rc=$?
expect_rc 1 "2 ranks against 1" ws
contains "$T/ws.out" "2 shards against 1 (world size 2 against 1): compared by name"
contains "$T/ws.out" "rank 1's shard only in A (world size 2 against 1)"
lacks "$T/ws.out" "file only in A"
json_true "$T/ws.json" \
  "sorted((x['kind'], x['file'], x['object']) for x in d['diffs'] if x['failing']) == [('attribute', 'shard_00000_of_00002.h5', '/meta@world_size'), ('missing_in_b', 'shard_00001_of_00002.h5', '')]" \
  "2 against 1: only /meta's world size and rank 1's shard fail (the weights compared by name are equal)"
"$RC_BIN" compare "$T/w2/iter_0000005" "$T/w2b/iter_0000005" >"$T/same.out" 2>&1
rc=$?
expect_rc 0 "control: one world size, the same state" same
"$RC_BIN" compare "$T/w2/iter_0000005" "$T/w2c/iter_0000005" >"$T/diff.out" 2>&1
rc=$?
expect_rc 1 "control: one world size, a weight changed" diff
contains "$T/diff.out" "/model/weight"
finish
