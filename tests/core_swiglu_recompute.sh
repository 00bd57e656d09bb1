#!/usr/bin/env bash
# core_swiglu_recompute.sh — a half fc2's saved input, the SwiGLU output, is
# recomputed by SwiGLU's backward instead of kept per layer (model.h
# sw_half): the memory goes and no bit changes. Shards and traces of bf16 and
# fp16 models, dense and MoE, with gradient-accumulation fusion on and off,
# are byte-identical to those of the same runs with RC_KEEP_SWIGLU_OUTPUT=1
# (an output kept per layer, as before); the model's memory table
# (RC_PROFILE) lists no per-layer fc2_h by default and one per layer with the
# switch. Negative control: another seed gives other bytes.
source "$(dirname "$0")/run_lib.sh"
need_train
same_bytes_under RC_KEEP_SWIGLU_OUTPUT 0 1 \
  "bf16_dense|--precision bf16 --moe-layers none" \
  "bf16_moe|--precision bf16" \
  "fp16_moe_unfused|--precision fp16 --no-gradient-accumulation-fusion" \
  "bf16_mtp_shared|--precision bf16 --mtp-repeated-layer"
seed_changes_bytes RC_KEEP_SWIGLU_OUTPUT=0 --precision bf16

# the memory table: no fc2_h per layer by default, one per layer kept, and
# fewer bytes of activations (an FFN wide enough for fc2_h to be listed)
mem() { # KEEP: the model's memory table of a 2-step bf16 leg
  RC_PROFILE=1 RC_KEEP_SWIGLU_OUTPUT=$1 "$RC_BIN" train --preset tiny --precision bf16 \
    --moe-layers none --ffn 1024 --steps 2 --warmup 0 --out "$T/mem$1" 2>&1 | grep "profile: memory:"
}
act() { awk '$3 == "activations" && $5 == "MiB" {print $4}' <<<"$1"; }
m0=$(mem 0)
m1=$(mem 1)
grep -q " fc2_h " <<<"$m0" && fail "recomputed: a per-layer fc2_h is still allocated"
grep -q " fc2_h " <<<"$m1" || fail "control: RC_KEEP_SWIGLU_OUTPUT=1 kept no fc2_h"
a0=$(act "$m0") a1=$(act "$m1")
awk -v a="$a0" -v b="$a1" 'BEGIN {exit !(a != "" && b != "" && a + 0 < b + 0)}' ||
  fail "recomputed activations ${a0:-?} MiB are not below kept ${a1:-?} MiB"
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
