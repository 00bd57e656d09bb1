#!/usr/bin/env bash
# py_torch_crosscheck.sh — the core's bf16 numerics against an independent
# PyTorch implementation (bench/torch_crosscheck.py): a tiny dense bf16 leg
# saves at steps 2 and 3, the script rebuilds step 3 from the step-2
# checkpoint with autograd in float64, rounding where ops.h says the core
# rounds (GEMM operands and output gradients, and the two outputs a half
# linear stores in 16 bits: the head's logits, fc1's [gate | up]), and the
# losses, each MTP depth's loss and the grad norm must agree to 5e-6
# relative (measured: 2.4e-10, 6.5e-10 / 4.0e-8, 8.8e-7). Negative control:
# the same check with those two outputs kept fp32 (--outputs-as fp32) must
# fail (measured: the grad norm 4.9e-5 off), so the agreement rests on the
# core rounding them. A BF16-attention leg checks the qkv projection's
# 16-bit output the same way (below). torch is required: without it the test FAILS.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy torch h5py
"$RC_BIN" train --preset tiny --precision bf16 --moe-layers none --steps 3 --save-at 2,3 \
  --out "$T/run" >"$T/train.log" 2>&1 || {
  fail "train failed"
  tail -5 "$T/train.log" >&2
  finish
}
X="$RC_SRC/bench/torch_crosscheck.py"
"$PY" "$X" "$T/run" --step 2 --loss-tol 5e-6 >"$T/stored.out" 2>&1
rc=$?
[ "$rc" = 0 ] && echo "ok: losses and grad norm agree to 5e-6 with the stored outputs rounded" || {
  fail "cross-check failed (exit $rc)"
  cat "$T/stored.out" >&2
}
grep -q '^mtp_loss_2 ' "$T/stored.out" && echo "ok: each MTP depth's loss checked" ||
  fail "no per-depth MTP loss row"
"$PY" "$X" "$T/run" --step 2 --loss-tol 5e-6 --outputs-as fp32 >"$T/fp32.out" 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: control: fp32 logits and fc1 outputs miss the tolerance" || {
  fail "control: the unrounded outputs passed (exit $rc)"
  cat "$T/fp32.out" >&2
}
# BF16 attention (gpu-small's): the qkv projection's output is stored in 16
# bits before RoPE (ops.h rope_forward qkv_half) and the reference rounds it
# too: the losses agree to 1e-6 (measured 2.9e-10, 3.2e-9, 4.6e-7), the grad
# norm to 5e-5 (1.1e-5: the reference's float64 sums flip a few of the
# attention's bf16 roundings the core's fp32 sums do not). Negative control:
# the reference without that rounding (--qkv-as fp32) misses (an MTP depth's
# loss 1.2e-5 off).
"$RC_BIN" train --preset tiny --precision bf16 --attention-precision bf16 --moe-layers none \
  --steps 3 --save-at 2,3 --out "$T/attn16" >"$T/attn16.log" 2>&1 || {
  fail "bf16-attention train failed"
  tail -5 "$T/attn16.log" >&2
  finish
}
"$PY" "$X" "$T/attn16" --step 2 --loss-tol 1e-6 --grad-tol 5e-5 >"$T/attn16.out" 2>&1
rc=$?
[ "$rc" = 0 ] && echo "ok: BF16 attention: losses to 1e-6, grad norm to 5e-5, qkv stored in 16 bits" || {
  fail "BF16-attention cross-check failed (exit $rc)"
  cat "$T/attn16.out" >&2
}
"$PY" "$X" "$T/attn16" --step 2 --loss-tol 1e-6 --grad-tol 5e-5 --qkv-as fp32 >"$T/attn16_fp32.out" 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: control: a reference with the qkv output kept fp32 misses" || {
  fail "control: the unrounded qkv passed (exit $rc)"
  cat "$T/attn16_fp32.out" >&2
}
finish
