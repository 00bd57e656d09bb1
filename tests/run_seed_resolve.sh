#!/usr/bin/env bash
# run_seed_resolve.sh — the merged fix (policy resolve) on the seed's
# configuration: every check byte-identical, exit 0.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --first-microbatch-policy resolve)
run_rc resolve "${F[@]}" --steps 10 --save-at 5 --out "$T/r" --progress off
expect_rc 0 "resolve policy" resolve
contains "$T/resolve.out" "A/A identical (through@5 vs save@5: 1/1 shards byte-identical"
contains "$T/resolve.out" "RESUME identical (through@10 vs resume@5→10: 1/1 shards byte-identical"
json_true "$T/r/report.json" "d['verdict'] == 'identical' and d['first_divergence'] is None" "verdict"
finish
