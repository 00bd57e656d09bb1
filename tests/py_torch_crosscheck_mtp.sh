#!/usr/bin/env bash
# py_torch_crosscheck_mtp.sh — the MTP lifecycle's configurations (docs/design.md
# §3.5) against the float64 PyTorch reference (bench/torch_crosscheck.py), as
# py_torch_crosscheck does for the default loss: a leg saves at steps 2 and 3,
# the reference rebuilds step 3 from the step-2 checkpoint and must agree on
# the losses, the grad norm, the detached heads' mtp_grad_norm and the AdamW
# update (every weight and moment at step 3) within the script's tolerances.
# fp32 legs (the reference's default 1e-5; measured 1e-9..8e-8 for the norms
# and losses, 6e-8..9e-7 for the update):
#   token-level, normalised per microbatch;  --calculate-per-token-loss
#   (token-level, raw sums normalised at the finish); sequence-level with
#   detached heads and an MTP clip that clips (0.02 against a norm of 0.07),
#   the MoE load-balancing loss over valid tokens; the same at the finish.
# Each has a control that computes one thing the wrong way and must fail
# (exit 1): the microbatch-mean loss (4e-4 off in the grad norm), the MTP term
# over the main loss's count (27x in mtp_grad_norm), the load-balancing loss
# over it (NeMo-RL's split-path issue: 5.8e-4 in the grad norm), heads
# attached (2e-3 in the grad norm), the MTP modules clipped with the rest's
# coefficient (the moments 1.6x off).
# A bf16 leg normalised at the finish agrees within 5e-5 (the BF16-attention
# check's grad-norm tolerance; measured 4e-7 losses, 7e-6 grad norm, 9e-7
# mtp_grad_norm) only with a reference that normalises at the finish too:
# bf16 rounds the raw sums, not the normalised gradients, so the two orders
# differ in bits (control: the per-microbatch reference misses by 5.5e-4 in
# mtp_grad_norm). torch is required: without it the test FAILS.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy torch h5py
X="$RC_SRC/bench/torch_crosscheck.py"

# leg NAME FLAGS...: a tiny leg saving at 2 and 3
leg() {
  local name=$1
  shift
  "$RC_BIN" train --preset tiny "$@" --steps 3 --save-at 2,3 --out "$T/$name" >"$T/$name.log" 2>&1 || {
    fail "$name: train failed"
    tail -5 "$T/$name.log" >&2
  }
}
# agrees NAME WHAT ARGS...: the reference agrees (exit 0)
agrees() {
  local name=$1 what=$2
  shift 2
  "$PY" "$X" "$T/$name" --step 2 "$@" >"$T/$name.ok.out" 2>&1
  local rc=$?
  [ "$rc" = 0 ] && echo "ok: $what" || {
    fail "$what: the cross-check failed (exit $rc)"
    cat "$T/$name.ok.out" >&2
  }
}
# misses NAME WHAT ARGS...: the control's reference fails (exit 1)
misses() {
  local name=$1 what=$2
  shift 2
  "$PY" "$X" "$T/$name" --step 2 "$@" >"$T/$name.ctl.out" 2>&1
  local rc=$?
  [ "$rc" = 1 ] && echo "ok: control: $what misses" || {
    fail "control: $what passed (exit $rc)"
    cat "$T/$name.ctl.out" >&2
  }
}
# checked NAME ROW: the cross-check's table has ROW (the check was made)
checked() {
  grep -q "^$2 " "$T/$1.ok.out" || fail "$1: the cross-check has no $2 row"
}

leg tok --precision fp32 --loss-type token-level
agrees tok "token-level per microbatch: losses, grad norm and update"
checked tok "weight@3"
misses tok "the microbatch-mean reference" --loss-type-as microbatch-mean

leg tokf --precision fp32 --calculate-per-token-loss
agrees tokf "token-level at the finish (--calculate-per-token-loss)"
misses tokf "the microbatch-mean reference" --loss-type-as microbatch-mean

leg seqd --precision fp32 --loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.02
agrees seqd "sequence-level, detached heads with their own clip: both norms and the update"
checked seqd mtp_grad_norm
checked seqd "exp_avg@3"
misses seqd "the MTP term over the main loss's count" --mtp-denominator-as main
misses seqd "the load-balancing loss over the main loss's count (NeMo-RL's split path)" \
  --aux-denominator-as main
misses seqd "attached heads" --heads-as attached
misses seqd "the MTP modules clipped with the rest's coefficient" --mtp-clip-as shared

leg seqdf --precision fp32 --loss-type sequence-level --mtp-detach-heads --loss-normalize-at finish \
  --moe-aux-loss-coeff 0
agrees seqdf "sequence-level, detached heads, at the finish"
checked seqdf mtp_grad_norm
misses seqdf "the MTP term over the main loss's count" --mtp-denominator-as main
misses seqdf "attached heads" --heads-as attached

leg bseq --precision bf16 --moe-layers none --loss-type sequence-level --mtp-detach-heads \
  --loss-normalize-at finish --mtp-clip-grad 0.02
agrees bseq "bf16 at the finish, within 5e-5" --loss-tol 5e-5
misses bseq "the per-microbatch reference of a bf16 finish run" --loss-tol 5e-5 \
  --normalize-at-as microbatch
finish
