#!/usr/bin/env bash
# dist_single_bytes.sh — one rank through the distributed optimizer
# (--collectives single: flatten, reduce-scatter, sharded AdamW, all-gather)
# writes exactly the bytes of the plain single-rank path, in fp32, bf16 and
# fp16 (loss scale != 1). Negative control: rank 0 of a 2-rank run (MPI,
# when available) differs.
source "$(dirname "$0")/dist_lib.sh"
need_train

for P in fp32 bf16 fp16; do
  F=(--preset tiny --precision $P --steps 3 --save-at 3 --dropout 0.1)
  "$RC_BIN" train "${F[@]}" --out "$T/plain$P" >/dev/null 2>&1 || fail "$P plain leg failed"
  "$RC_BIN" train "${F[@]}" --collectives single --out "$T/single$P" >/dev/null 2>&1 || fail "$P single leg failed"
  same_files "$T/plain$P/ckpt/iter_0000003/shard_00000_of_00001.h5" "$T/single$P/ckpt/iter_0000003/shard_00000_of_00001.h5" \
    "$P shard, plain vs single"
  same_files "$T/plain$P/ckpt/iter_0000003/manifest.json" "$T/single$P/ckpt/iter_0000003/manifest.json" "$P manifest"
  same_files "$T/plain$P/trace.csv" "$T/single$P/trace.csv" "$P trace, plain vs single"
done
if command -v mpiexec >/dev/null 2>&1 &&
  "$RC_BIN" train --preset tiny --precision fp16 --steps 3 --save-at 3 --dropout 0.1 --world-size 2 --out "$T/w2" >/dev/null 2>&1; then
  differ_files "$T/plainfp16/ckpt/iter_0000003/shard_00000_of_00001.h5" "$T/w2/ckpt/iter_0000003/shard_00000_of_00002.h5" \
    "W=1 vs rank 0 of W=2"
else
  echo "note: no MPI, negative control skipped"
fi
finish
