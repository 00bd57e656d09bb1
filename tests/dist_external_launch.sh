#!/usr/bin/env bash
# dist_external_launch.sh — ranks started by an external launcher. CPU: the
# collectives are MPI, so the launcher is `mpirun -np 2` (OMPI_COMM_WORLD_*
# variables): its shards equal those of `--world-size 2` spawning its own
# ranks. RANK/WORLD_SIZE/LOCAL_RANK (torchrun / Slurm style) are read too: a
# size that contradicts --world-size is refused, and on the CPU backend
# without MPI's launcher the job cannot form (clear error, no hang).
source "$(dirname "$0")/dist_lib.sh"
need_mpi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_hwloc_base_binding_policy=none
F=(--preset tiny --steps 3 --save-at 3 --dropout 0.1)
"$RC_BIN" train "${F[@]}" --world-size 2 --out "$T/local" >"$T/local.out" 2>&1 || fail "local W=2 failed"
mpiexec -n 2 "$RC_BIN" train "${F[@]}" --world-size 2 --out "$T/ext" >"$T/ext.out" 2>&1 ||
  fail "mpiexec -n 2 failed: $(cat "$T/ext.out")"
for r in 0 1; do
  same_files "$T/local/ckpt/iter_0000003/shard_0000${r}_of_00002.h5" "$T/ext/ckpt/iter_0000003/shard_0000${r}_of_00002.h5" \
    "rank $r, local launch vs mpiexec"
done
same_files "$T/local/trace.csv" "$T/ext/trace.csv" "trace, local launch vs mpiexec"
grep -q '"launcher": *"openmpi"' "$T/ext/ckpt/iter_0000003/args.json" || fail "args.json lacks launcher openmpi"
# the ranks differ (own data slice, own dropout stream): not a copy of rank 0
differ_files "$T/ext/ckpt/iter_0000003/shard_00000_of_00002.h5" "$T/ext/ckpt/iter_0000003/shard_00001_of_00002.h5" "rank 0 vs 1"

# a launcher whose size contradicts --world-size
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$RC_BIN" train "${F[@]}" --world-size 3 --out "$T/bad" >"$T/bad.out" 2>&1
rc=$?
[ $rc = 64 ] || fail "WORLD_SIZE=2 with --world-size 3: exit $rc, want 64"
contains "$T/bad.out" "the launcher (env) started 2 ranks but --world-size is 3"
finish
