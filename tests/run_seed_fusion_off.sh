#!/usr/bin/env bash
# run_seed_fusion_off.sh — the seed's bug (policy legacy) with
# gradient-accumulation fusion off: the flag can no longer select an
# overwrite, so resume is exact, exit 0.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --first-microbatch-policy legacy)
run_rc off "${F[@]}" --grad-accum-fusion off --steps 10 --save-at 5 --out "$T/o" --progress off
expect_rc 0 "legacy with fusion off" off
contains "$T/off.out" "RESUME identical"
finish
