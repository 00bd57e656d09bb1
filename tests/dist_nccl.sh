#!/usr/bin/env bash
# dist_nccl.sh — the CUDA backend's collectives (NCCL). One GPU suffices:
# one rank joined through an external-launcher environment (RANK/WORLD_SIZE/
# LOCAL_RANK, --rendezvous FILE) writes exactly the bytes of the non-NCCL
# path, and the rendezvous file is removed once the rank joined. With >= 2
# GPUs, a 2-rank three-leg run is byte-identical too; with fewer that part
# is skipped. Skips (77) without a GPU or NCCL.
source "$(dirname "$0")/dist_lib.sh"
need_train

F=(--preset tiny --steps 3 --save-at 3 --device cuda)
"$RC_BIN" train "${F[@]}" --out "$T/plain" >"$T/plain.out" 2>&1
rc=$?
if [ $rc = 125 ]; then
  echo "skip: no CUDA device ($(tail -1 "$T/plain.out"))"
  exit 77
fi
[ $rc = 0 ] || fail "plain CUDA leg: exit $rc: $(cat "$T/plain.out")"
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$RC_BIN" train "${F[@]}" --collectives nccl --rendezvous "$T/rdv" \
  --out "$T/nccl" >"$T/nccl.out" 2>&1
rc=$?
if [ $rc = 125 ] && grep -q "needs NCCL" "$T/nccl.out"; then
  echo "skip: this build has no NCCL"
  exit 77
fi
[ $rc = 0 ] || fail "NCCL leg: exit $rc: $(cat "$T/nccl.out")"
same_files "$T/plain/ckpt/iter_0000003/shard_00000_of_00001.h5" "$T/nccl/ckpt/iter_0000003/shard_00000_of_00001.h5" \
  "shard, plain vs NCCL W=1"
same_files "$T/plain/trace.csv" "$T/nccl/trace.csv" "trace, plain vs NCCL W=1"
[ -e "$T/rdv" ] && fail "the rendezvous file was left behind"
grep -q 'NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0' "$T/nccl/ckpt/iter_0000003/args.json" ||
  fail "args.json does not record the pinned NCCL settings"
# negative control: another seed gives other bytes
"$RC_BIN" train "${F[@]}" --seed 7 --out "$T/seed7" >/dev/null 2>&1
differ_files "$T/plain/ckpt/iter_0000003/shard_00000_of_00001.h5" "$T/seed7/ckpt/iter_0000003/shard_00000_of_00001.h5" "seed 7"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpu:-0}" -ge 2 ]; then
  run_rc w2 --preset tiny --steps 6 --save-at 3 --device cuda --world-size 2 --progress off --out "$T/w2"
  expect_rc 0 "NCCL W=2 three legs" w2
  contains "$T/w2.out" "RESUME identical (through@6 vs resume@3→6: 2/2 shards byte-identical"
else
  echo "note: $ngpu GPU(s): the 2-rank NCCL run needs 2, skipped"
fi
finish
