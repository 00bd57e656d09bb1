#!/usr/bin/env bash
# run_seed_legacy.sh — the seed on the real CPU core: bf16, 2 MTP depths
# sharing one layer, policy legacy, N=10, K=5. A/A identical, RESUME
# diverges at step 6 in grad_norm with the loss still equal, exit 1.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --first-microbatch-policy legacy)
run_rc legacy "${F[@]}" --steps 10 --save-at 5 --out "$T/l" --progress off --plot "$T/l.svg"
expect_rc 1 "legacy policy" legacy
contains "$T/legacy.out" "A/A identical (through@5 vs save@5: 1/1 shards byte-identical; args.json differs by construction)"
contains "$T/legacy.out" "RESUME diverged at step 6: grad_norm"
contains "$T/legacy.out" "; loss equal"
contains "$T/legacy.out" "first differing dataset: /"
R="$T/l/report.json"
json_true "$R" "d['verdict'] == 'resume-diverged' and d['exit_code'] == 1" "verdict"
json_true "$R" "d['first_divergence']['step'] == 6" "first divergent step 6"
json_true "$R" "'grad_norm' in d['first_divergence']['columns'] and 'loss' not in d['first_divergence']['columns']" "grad_norm differs, loss does not"
json_true "$R" "'loss' in d['first_divergence']['equal_columns']" "loss equal at step 6"
json_true "$R" "d['config']['canonical'] is not None" "canonical config from train --dry-run"
xml_ok "$T/l.svg" "SVG"
finish
