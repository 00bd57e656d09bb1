#!/usr/bin/env bash
# gpu_mtp_lifecycle.sh — the MTP lifecycle's configurations (docs/design.md
# §3.5) on the CUDA backend, which runs them through the same ops as the CPU
# (no op of their own): A/A (--aa) and RESUME byte-identical for token-level
# per microbatch and at the finish, sequence-level with detached heads and
# their own clip at either order, and gpu-small with detached heads; the
# planted mtp-denominator-from-main-after-resume is reported at K+1 with
# mtp_grad_norm first (the control: the verifier is not blind there). Skips
# without a GPU.
set -u
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
: "${RC_BIN:?RC_BIN is not set}"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
expect() { # name rc flags...
  local name=$1 want=$2
  shift 2
  out=$("$RC_BIN" run --device cuda "$@" --out "$t/$name" 2>"$t/$name.err")
  rc=$?
  echo "$out" | grep -E "verdict|RESUME diverged|A/A" | head -3
  [ "$rc" = "$want" ] && echo "ok: $name exit $rc" || {
    echo "FAIL: $name exit $rc, expected $want"
    tail -5 "$t/$name.err"
    fail=1
  }
}
SEQ=(--loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.02)
expect token 0 --steps 10 --save-at 5 --aa --loss-type token-level
expect token_finish 0 --steps 10 --save-at 5 --aa --calculate-per-token-loss --mtp-detach-heads
expect seq_detached 0 --steps 10 --save-at 5 --aa "${SEQ[@]}"
expect seq_detached_finish 0 --steps 10 --save-at 5 --aa "${SEQ[@]}" --loss-normalize-at finish \
  --moe-aux-loss-coeff 0
expect gpu_small_detached 0 --preset gpu-small --steps 4 --save-at 2 --aa --calculate-per-token-loss \
  --mtp-detach-heads
expect seq_bug 1 --steps 10 --save-at 5 "${SEQ[@]}" --inject mtp-denominator-from-main-after-resume
grep -q "RESUME diverged at step 6: mtp_grad_norm" <<<"$out" && echo "ok: mtp_grad_norm first at step 6" ||
  { echo "FAIL: the planted bug's signature"; fail=1; }
exit $fail
