#!/usr/bin/env bash
# dist_mpi_run.sh — data parallel on the CPU backend (MPI), three legs each:
# W=2 and W=3 with policy resolve are byte-identical with W shards per
# checkpoint; the seed's bug (legacy + repeated MTP + bf16 + fusion on)
# still diverges at W=2 (negative control: the verifier is not blind there);
# fp8 at W=2 is byte-identical (its amax histories are reduced across ranks).
source "$(dirname "$0")/dist_lib.sh"
need_mpi

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --steps 6 --save-at 3 --progress off)
for W in 2 3; do
  run_rc w$W "${F[@]}" --first-microbatch-policy resolve --world-size $W --out "$T/w$W"
  expect_rc 0 "resolve at W=$W" w$W
  contains "$T/w$W.out" "RESUME identical (through@6 vs resume@3→6: $W/$W shards byte-identical"
  contains "$T/w$W.out" "A/A identical (through@3 vs save@3: $W/$W shards byte-identical"
  for leg in through save resume@3; do
    for it in "$T/w$W/$leg"/ckpt/iter_*; do nshards "$it" $W; done
  done
  grep -q '"collectives": *"mpi"' "$T/w$W/through/ckpt/iter_0000006/args.json" ||
    fail "W=$W: args.json does not record the MPI collectives"
done
# the ranks really saw different data: W=2 and W=3 end in different weights
differ_files "$T/w2/through/ckpt/iter_0000006/shard_00000_of_00002.h5" \
  "$T/w3/through/ckpt/iter_0000006/shard_00000_of_00003.h5" "W=2 vs W=3"

# fp8: each rank's activations differ, so do their amaxes; the histories are
# reduced by max across ranks at every step's end, so the one saved copy is
# every rank's and resume is byte-identical
run_rc fp8 "${F[@]/bf16/fp8}" --first-microbatch-policy resolve --world-size 2 --out "$T/fp8"
expect_rc 0 "fp8 at W=2" fp8
contains "$T/fp8.out" "RESUME identical (through@6 vs resume@3→6: 2/2 shards byte-identical"

run_rc legacy "${F[@]}" --first-microbatch-policy legacy --grad-accum-fusion on --world-size 2 --out "$T/l2"
expect_rc 1 "the seed's bug at W=2" legacy
contains "$T/legacy.out" "A/A identical"
contains "$T/legacy.out" "RESUME diverged at step 4: grad_norm"
finish
