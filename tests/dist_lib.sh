#!/usr/bin/env bash
# dist_lib.sh — helpers of the data-parallel tests (docs/distributed.md), on
# top of run_lib.sh. CPU ranks talk through MPI: without an MPI launcher, or
# with a build that has no MPI, these tests skip (77).
source "$(dirname "$0")/run_lib.sh"

need_mpi() {
  need_train
  command -v mpiexec >/dev/null 2>&1 || {
    echo "skip: no mpiexec (install libopenmpi-dev openmpi-bin)"
    exit 77
  }
  local out
  out=$("$RC_BIN" train --preset tiny --steps 2 --world-size 2 --out "$T/probe" 2>&1)
  local r=$?
  if [ $r = 125 ] && grep -q "needs MPI" <<<"$out"; then
    echo "skip: this build has no MPI"
    exit 77
  fi
  [ $r = 0 ] || { echo "FAIL: the 2-rank probe failed ($r): $out" >&2; exit 1; }
}

# same_files A B WHAT: A and B are byte-identical.
same_files() { cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"; }
differ_files() { if cmp -s "$1" "$2"; then fail "$3: $1 and $2 should differ"; fi; }
# nshards DIR N: DIR has exactly N state shards, named for world size N.
nshards() {
  local n
  n=$(ls "$1"/shard_*_of_0000"$2".h5 2>/dev/null | wc -l)
  [ "$n" = "$2" ] || fail "$1: $n shards of $2, want $2"
  [ "$(ls "$1"/shard_*.h5 | wc -l)" = "$2" ] || fail "$1: stray shards"
}
