#!/usr/bin/env bash
# core_model_params_copy.sh — the optimizer writes each half linear's weight
# copy (Megatron's main params to model params) from the weights it has just
# updated (ops.h adamw_many param_half), and the next step's forward casts
# none: no bit changes. Shards and traces of bf16, fp16 and fp8 models,
# dense and MoE, with gradient-accumulation fusion on and off, a shared MTP
# layer and a tied output head, are byte-identical to those of the same runs
# with RC_MODEL_PARAMS_FROM_OPTIMIZER=0 (every copy cast by the forward, as
# before); a run that saves at 2 and resumes in a new process (whose first
# step casts, where the train-through process uses the optimizer's copies)
# is RESUME identical. The copy is made: the profiled steps after the first
# call cast_half fewer times by at least one weight a step (RC_PROFILE=ops).
# Negative control: another seed gives other bytes.
source "$(dirname "$0")/run_lib.sh"
need_train
same_bytes_under RC_MODEL_PARAMS_FROM_OPTIMIZER 1 0 \
  "bf16_dense|--precision bf16 --moe-layers none" \
  "bf16_moe|--precision bf16" \
  "fp16_moe_unfused|--precision fp16 --no-gradient-accumulation-fusion" \
  "bf16_mtp_shared|--precision bf16 --mtp-repeated-layer" \
  "bf16_tied|--precision bf16 --tie-embeddings" \
  "fp8|--precision fp8"
seed_changes_bytes RC_MODEL_PARAMS_FROM_OPTIMIZER=1 --precision bf16

# resumed in a new process: its first step casts what the through leg's optimizer wrote
"$RC_BIN" run --preset tiny --precision bf16 --steps 4 --save-at 2 --out "$T/run" >"$T/run.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q "RESUME identical" "$T/run.out" ||
  fail "run with the optimizer's copies: exit $rc, $(grep -m1 -i resume "$T/run.out")"

# the copy is made: fewer casts in the profiled steps (2..4) than with it off
casts() { # SWITCH: cast_half calls in the op table of a 4-step bf16 leg
  RC_PROFILE=ops RC_MODEL_PARAMS_FROM_OPTIMIZER=$1 "$RC_BIN" train --preset tiny --precision bf16 \
    --steps 4 --out "$T/prof$1" 2>&1 >/dev/null | awk '$1 == "cast_half" {print $2; exit}'
}
on=$(casts 1) off=$(casts 0)
[ -n "$on" ] && [ -n "$off" ] && [ $((off - on)) -ge 3 ] ||
  fail "cast_half calls in steps 2..4: ${on:-none} with the optimizer's copy, ${off:-none} without"
[ "$fails" = 0 ] && echo "ok (cast_half in steps 2..4: $on with the optimizer's copy, $off without)"
