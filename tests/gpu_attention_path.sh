#!/usr/bin/env bash
# gpu_attention_path.sh — which BF16 attention kernels a CUDA leg runs, and
# that the run says so. On a compute capability 9.0 GPU the module's sm_90a
# code holds the wgmma kernels (kernels/cuda_attention_wgmma.cu): a
# gpu-small dense leg's args.json names "wgmma" in cuda_device; with
# RC_CUDA_ATTENTION=mma (a kernel switch) it names mma.sync alone, records
# the switch, and its checkpoint's bytes are the default leg's: the wgmma
# kernels reproduce the mma.sync kernels' bits (the same k-steps, the same
# dQ chain over 128 keys; since session 20), against a control leg with
# another seed whose bytes differ. On another GPU no leg names wgmma. The
# kernels' numerics: cuda_ops (wgmma where it runs) and cuda_ops_mma.
# Skips without a GPU.
set -u
: "${RC_BIN:?RC_BIN is not set}"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
T=$(mktemp -d /tmp/rc_attn_path.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
leg() { # NAME [ENV=VALUE...]: a 2-step gpu-small dense leg, saved at 2 ($extra: more flags)
  local name=$1
  shift
  # shellcheck disable=SC2086 # $extra is a list of flags
  env -u RC_CUDA_ATTENTION "$@" "$RC_BIN" train --preset gpu-small --moe-layers none --device cuda \
    --steps 2 --save-at 2 ${extra:-} --out "$T/$name" >"$T/$name.out" 2>"$T/$name.err" ||
    fail "leg $name failed: $(tail -1 "$T/$name.err")"
}
device_line() { tr -d '\n' <"$T/$1/ckpt/iter_0000002/args.json" | grep -o '"cuda_device": *"[^"]*"'; }
leg default
leg mma RC_CUDA_ATTENTION=mma
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')
d_default=$(device_line default) d_mma=$(device_line mma)
echo "default: $d_default"
echo "mma:     $d_mma"
if [ "$cc" = "9.0" ]; then
  grep -q "attention wgmma" <<<"$d_default" || fail "compute capability 9.0: the default leg did not run wgmma"
else
  grep -q "wgmma" <<<"$d_default" && fail "compute capability $cc: a leg claims wgmma"
fi
grep -q "mma.sync" <<<"$d_mma" || fail "RC_CUDA_ATTENTION=mma: the device line names no mma.sync"
grep -q "wgmma" <<<"$d_mma" && fail "RC_CUDA_ATTENTION=mma: the device line still names wgmma"
tr -d ' \n' <"$T/mma/ckpt/iter_0000002/args.json" | grep -q '"RC_CUDA_ATTENTION":"mma"' ||
  fail "RC_CUDA_ATTENTION=mma not recorded in args.json's kernel_switches"
tr -d ' \n' <"$T/default/ckpt/iter_0000002/args.json" | grep -q '"RC_CUDA_ATTENTION"' &&
  fail "control: args.json records RC_CUDA_ATTENTION though it was not set"
bytes() { find "$T/$1/ckpt" -name '*.h5' | sort | xargs -r cat | sha256sum | cut -c1-16; }
extra="--seed 4321" leg seed # the control below: the default path, another seed
empty=$(printf '' | sha256sum | cut -c1-16)
[ "$(bytes default)" != "$empty" ] || fail "the default leg wrote no shards"
[ "$(bytes default)" = "$(bytes mma)" ] ||
  fail "the wgmma and mma.sync legs wrote different bytes (the wgmma backward no longer gives mma.sync's bits)"
[ "$(bytes default)" != "$(bytes seed)" ] || fail "control: a leg with another seed wrote the same bytes"
python3 - "$T/default/trace.csv" "$T/mma/trace.csv" <<'PY' || fail "losses of the two paths disagree"
import csv, sys
a, b = (list(csv.DictReader(open(f))) for f in sys.argv[1:3])
assert len(a) == len(b) == 2, (len(a), len(b))
for x, y in zip(a, b):
    assert x["loss"] == y["loss"], (x["loss"], y["loss"])
PY
[ "$fails" = 0 ] && echo "ok: default $([ "$cc" = 9.0 ] && echo wgmma || echo mma.sync), RC_CUDA_ATTENTION=mma mma.sync, recorded, the same bytes and losses"
exit $((fails > 0))
