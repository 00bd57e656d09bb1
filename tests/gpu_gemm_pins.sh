#!/usr/bin/env bash
# gpu_gemm_pins.sh — the GEMM keys kernels/cuda_gemm.cu pins to a measured
# algorithm take it: a gpu-small dense leg on a compute capability 9.0 GPU
# plans each of its 10 pinned keys once, from the pin ("from=pinned" in the
# plan log, none "not offered"), and so does a B16 x M1 V50304 leg its 10;
# with RC_CUDA_GEMM_PINS=0 (a kernel switch)
# none is pinned, args.json records the switch, and the losses agree with the
# pinned leg's to bf16 tolerance (both are correct GEMMs, in other orders).
# A gpu-small MoE leg with the expert GEMMs on cuBLASLt (RC_CUDA_GROUPED_GEMM=
# cublas: by default sm_90a runs them as one CUTLASS grouped GEMM, which its
# args.json names, planning none on cuBLASLt) plans some of them from a pinned bucket shape
# ("from=bucket#i (pinned)", the pin's tile), none with the switch at 0.
# On another GPU no key is pinned. The pinned numerics themselves: cuda_ops.
# A/A with the pins: gpu_harness (gpu_small_dense_aa). Skips without a GPU.
set -u
: "${RC_BIN:?RC_BIN is not set}"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
T=$(mktemp -d /tmp/rc_gemm_pins.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
SHAPE=() # extra flags of the leg
losses_agree() { # NAME NAME: the two legs' 2 losses agree to bf16 tolerance
  python3 - "$T/$1/trace.csv" "$T/$2/trace.csv" <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(f))) for f in sys.argv[1:3])
assert len(a) == len(b) == 2, (len(a), len(b))
for x, y in zip(a, b):
    la, lb = float(x["loss"]), float(y["loss"])
    assert abs(la - lb) <= 1e-3 * abs(lb), (la, lb)
PY
}
leg() { # NAME [ENV=VALUE...]: a 2-step gpu-small dense leg with the plan log
  local name=$1
  shift
  env "$@" RC_CUDA_GEMM_LOG=1 "$RC_BIN" train --preset gpu-small --moe-layers none --device cuda \
    ${SHAPE[@]+"${SHAPE[@]}"} --steps 2 --save-at 2 --out "$T/$name" >"$T/$name.out" \
    2>"$T/$name.err" || fail "leg $name failed: $(tail -1 "$T/$name.err")"
}
leg pinned
leg first RC_CUDA_GEMM_PINS=0
SHAPE=(--micro-batch 16 --microbatches 1 --vocab 50304)
leg pinned16
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')
want=0
[ "$cc" = "9.0" ] && want=10
for name in pinned pinned16; do
  got=$(grep -c "from=pinned " "$T/$name.err")
  [ "$got" = "$want" ] ||
    fail "$name: compute capability $cc: $got keys planned from a pin, expected $want"
  grep -q "pinned configuration not offered" "$T/$name.err" &&
    fail "$name: a pinned configuration was not offered"
done
# the MoE leg: expert GEMMs planned at their row buckets (2048 or 4096 rows)
moe_leg() { # NAME [ENV=VALUE...]
  local name=$1
  shift
  env "$@" RC_CUDA_GEMM_LOG=1 "$RC_BIN" train --preset gpu-small --device cuda --steps 2 \
    --save-at 2 --out "$T/$name" >"$T/$name.out" 2>"$T/$name.err" ||
    fail "leg $name failed: $(tail -1 "$T/$name.err")"
}
moe_leg moe RC_CUDA_GROUPED_GEMM=cublas
moe_leg moe_first RC_CUDA_GROUPED_GEMM=cublas RC_CUDA_GEMM_PINS=0
moe_leg moe_grouped
grep -q 'expert GEMMs cuBLASLt one by one' "$T/moe/ckpt/iter_0000002/args.json" ||
  fail "RC_CUDA_GROUPED_GEMM=cublas: args.json does not say the expert GEMMs ran on cuBLASLt"
if [ "$cc" = "9.0" ]; then
  grep -q 'expert GEMMs CUTLASS [0-9.]* grouped' "$T/moe_grouped/ckpt/iter_0000002/args.json" ||
    fail "sm_90: args.json does not name the CUTLASS grouped expert GEMMs"
  # the grouped kernel took every expert GEMM: none planned on cuBLASLt at a row bucket
  # (the cuBLASLt leg plans some, below); the two agree to bf16 tolerance (at gpu-small
  # they write the same bytes, session 27: both sum each tile's k in increasing order in
  # fp32, no split-K; ops.h promises the tolerance, not the bytes)
  n_bucket=$(grep -c "from=bucket" "$T/moe_grouped.err")
  [ "$n_bucket" = 0 ] || fail "sm_90: $n_bucket expert GEMMs planned on cuBLASLt beside the grouped kernel"
  [ "$(grep -c "from=bucket" "$T/moe.err")" -ge 1 ] ||
    fail "control: the cuBLASLt leg planned no expert GEMM at a row bucket"
  losses_agree moe_grouped moe || fail "grouped and cuBLASLt expert GEMMs: losses disagree"
fi
got=$(grep -c "from=bucket#[0-9]* (pinned)" "$T/moe.err")
if [ "$cc" = "9.0" ]; then
  [ "$got" -ge 1 ] || fail "MoE leg: no expert GEMM planned from a pinned bucket"
  bad=$(grep "from=bucket#[0-9]* (pinned)" "$T/moe.err" | grep -cvE " tile=(208|20|116) ")
  [ "$bad" = 0 ] || fail "MoE leg: $bad bucket plans marked pinned with another tile"
else
  [ "$got" = 0 ] || fail "MoE leg on compute capability $cc: $got bucket plans pinned"
fi
n_moe_off=$(grep -c "(pinned)" "$T/moe_first.err")
[ "$n_moe_off" = 0 ] || fail "RC_CUDA_GEMM_PINS=0: $n_moe_off MoE bucket plans still pinned"
n_off=$(grep -c "from=pinned " "$T/first.err")
[ "$n_off" = 0 ] || fail "RC_CUDA_GEMM_PINS=0: $n_off keys still pinned"
grep -q '"RC_CUDA_GEMM_PINS"' "$T/first/ckpt/iter_0000002/args.json" ||
  fail "RC_CUDA_GEMM_PINS=0 not recorded in args.json's kernel_switches"
grep -q '"RC_CUDA_GEMM_PINS"' "$T/pinned/ckpt/iter_0000002/args.json" &&
  fail "control: args.json records RC_CUDA_GEMM_PINS though it was not set"
losses_agree pinned first || fail "losses of the pinned and unpinned legs disagree"
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
