#!/usr/bin/env bash
# crosscheck_session.sh - the PyTorch cross-check (bench/torch_crosscheck.py) of
# step K+1 = 3 from the checkpoint at 2, on the GPU machine: tiny fp32, tiny
# bf16 with bf16 attention, gpu-small as its preset is (bf16, bf16 attention),
# and, as controls, the bf16-attention runs checked against fp32 attention.
#   OUT=/dir bash bench/crosscheck_session.sh   (binaries: build-carry/)
set -u
export HDF5_DISABLE_VERSION_CHECK=2 LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=${RC_BIN:-build-carry/resumecheck}
xc() { # name run step extra...
  local name=$1 run=$2; shift 2
  echo "== $name"; timeout 240 python3 bench/torch_crosscheck.py "$run" --step 2 "$@" > $OUT/$name.txt 2>&1; echo "exit $?"
  grep -v '^{' $OUT/$name.txt | tail -12
}
$B train --preset tiny --precision bf16 --attention-precision bf16 --device cuda --steps 3 --save-at 2,3 --out /tmp/t_bf16a > /dev/null 2>&1 || echo train1 failed
$B train --preset tiny --precision fp32 --device cuda --steps 3 --save-at 2,3 --out /tmp/t_fp32 > /dev/null 2>&1 || echo train2 failed
$B train --preset gpu-small --device cuda --steps 3 --save-at 2,3 --out /tmp/gs > /dev/null 2>&1 || echo train3 failed
xc tiny_fp32 /tmp/t_fp32
xc tiny_bf16_attn_bf16 /tmp/t_bf16a
xc tiny_bf16_attn_bf16_as_fp32 /tmp/t_bf16a --attention-as fp32
xc gpu_small_default /tmp/gs --dtype float32
xc gpu_small_as_fp32 /tmp/gs --dtype float32 --attention-as fp32
