#!/usr/bin/env bash
# gpu_harness.sh — the verifier on the CUDA backend: A/A for tiny and
# gpu-small (two processes, byte-identical shards and traces), the seed's bug
# through the harness (legacy diverges at K+1 with grad norm first and loss
# equal; resolve and fusion off identical), with fp32 and with bf16 (tensor-core)
# attention; gpu-small's preset uses bf16 attention. Skips without a GPU.
set -u
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
expect() { # name rc flags...
  local name=$1 want=$2; shift 2
  out=$("$RC_BIN" run --device cuda "$@" --out "$t/$name" 2>"$t/$name.err"); rc=$?
  echo "$out" | grep -E "verdict|RESUME diverged|A/A" | head -3
  [ "$rc" = "$want" ] && echo "ok: $name exit $rc" || { echo "FAIL: $name exit $rc, expected $want"; tail -5 "$t/$name.err"; fail=1; }
}
expect tiny_aa 0 --steps 10 --save-at 5 --aa
expect seed_legacy 1 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy
grep -q "RESUME diverged at step 6: grad_norm" <<<"$out" && echo "ok: grad norm first at step 6" || { echo "FAIL: signature"; fail=1; }
grep -q "loss equal" <<<"$out" && echo "ok: loss equal" || { echo "FAIL: loss not equal"; fail=1; }
expect seed_resolve 0 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy resolve
expect seed_fusion_off 0 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy --grad-accum-fusion off
expect tiny_aa_bf16_attention 0 --steps 10 --save-at 5 --aa --attention-precision bf16
expect seed_legacy_bf16_attention 1 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy --attention-precision bf16
grep -q "RESUME diverged at step 6: grad_norm" <<<"$out" && echo "ok: grad norm first at step 6 (bf16 attention)" || { echo "FAIL: signature (bf16 attention)"; fail=1; }
expect gpu_small_aa 0 --preset gpu-small --steps 4 --save-at 2 --aa
exit $fail
