#!/usr/bin/env bash
# gpu_fp8_matrix.sh — the seed's fp8 cells on the GPU, with real FP8 GEMMs
# (cuBLASLt E4M3): every policy x shared/separate MTP layer x fusion on/off
# gives the RESUME verdict docs/seed-matrix.md gives, the arms comparison
# flags the cells wrong in every leg alike, and --no-weight-cache passes.
# The same expectations as the CPU's matrix_fp8_* / arms_fp8_* tests
# (catalogue.cmake), through tests/catalogue.sh with --device cuda. Also A/A
# byte-identical for gpu-small at fp8, dense and with its MoE layer. Skips
# without a GPU.
set -u
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
here=$(dirname "$0")
fail=0 cells=0
cell() { # name want_rc flags...
  local name=$1 want=$2; shift 2
  cells=$((cells + 1))
  if out=$(bash "$here/catalogue.sh" "$want" - - --device cuda --progress off "$@" 2>&1); then
    echo "ok: $name exit $want"
  else
    echo "FAIL: $name (expected exit $want)"
    tail -8 <<<"$out"
    fail=1
  fi
}
for layer in repeated separate; do
  [ $layer = repeated ] && layer_flag=--mtp-repeated-layer || layer_flag=--mtp-separate-layers
  for policy in legacy untracked-none resolve always-false persist; do
    for fusion in on off; do
      want=0
      [ $policy = always-false ] && want=1 # the stale fp8 cache: RESUME diverges
      cell "fp8_${layer}_${policy}_fusion_${fusion}" $want --precision fp8 $layer_flag \
        --first-microbatch-policy $policy --grad-accum-fusion $fusion
    done
    arms=0
    if [ $layer = repeated ] && [ $policy != resolve ]; then arms=1; fi # overwrites in every leg
    [ $policy = always-false ] && arms=1
    cell "arms_fp8_${layer}_${policy}" $arms --confirm-arm --precision fp8 $layer_flag \
      --first-microbatch-policy $policy
  done
done
cell fp8_no_weight_cache_legacy 0 --precision fp8 --mtp-repeated-layer --first-microbatch-policy legacy --no-weight-cache
# the always-false signature: the loss is first to diverge, at K+1
out=$("$RC_BIN" run --device cuda --progress off --steps 10 --save-at 5 --precision fp8 --mtp-repeated-layer \
  --first-microbatch-policy always-false --out "$(mktemp -d)/r" 2>/dev/null)
grep -q "RESUME diverged at step 6: loss" <<<"$out" && echo "ok: always-false diverges at step 6, loss first" ||
  { echo "FAIL: always-false signature"; grep -E "RESUME" <<<"$out" | head -2; fail=1; }
# gpu-small at fp8 (its MoE layer included) and dense: two processes, identical bytes
cell gpu_small_fp8_aa 0 --preset gpu-small --precision fp8 --aa
cell gpu_small_fp8_dense_aa 0 --preset gpu-small --moe-layers none --precision fp8 --aa
echo "$cells cells, $([ $fail = 0 ] && echo all as documented || echo FAILED)"
exit $fail
