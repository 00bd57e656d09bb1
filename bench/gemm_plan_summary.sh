#!/usr/bin/env bash
# gemm_plan_summary.sh — what GEMM planning costs a run: runs a leg with
# RC_CUDA_GEMM_LOG=1 and sums the plans it made by where their algorithm
# came from (a bucket's, checked for the shape; the heuristic for the exact
# shape) and by host time. Run from the repo root on the GPU machine:
#
#   RC_BIN=build/resumecheck bash bench/gemm_plan_summary.sh [train flags...]
set -u
RC_BIN="${RC_BIN:-./build/resumecheck}"
dir=$(mktemp -d)
RC_CUDA_GEMM_LOG=1 "$RC_BIN" train --device cuda --out "$dir/o" "$@" > /dev/null 2> "$dir/log"
echo "exit $?"
grep "gemm plan" "$dir/log" | sed -E 's/.* from=([a-z#0-9 ()]+) \(([0-9.]+) ms\)$/\1|\2/' |
  awk -F'|' '{n[$1]++; t[$1] += $2} END {for (s in n) printf "%-28s %5d plans %9.1f ms\n", s, n[s], t[s]}'
echo "the slowest five:"
grep "gemm plan" "$dir/log" | sed -E 's/^(.*) \(([0-9.]+) ms\)$/\2 ms: \1/' | sort -g | tail -5
rm -rf "$dir"
