#!/usr/bin/env bash
# gpu_session.sh — one GPU-machine session in one call: correctness first,
# then throughput, then where the time goes. Device time is scarce (one
# short lease per session), so everything runs from one command and every
# result lands in $OUT as it is produced (a run cut short still reports).
#
#   OUT=/dir RC_BUILD=build-dev bash bench/gpu_session.sh
#
# RC_BUILD is a build directory made elsewhere (CUDA arch 90, no MPI: the
# GPU image has none); if its binaries cannot run here (missing libraries, an
# HDF5 that refuses them), the tree is configured and built here instead.
# Files written to $OUT (at most 8, the device tool's limit): session.log,
# cuda_ops.log, gpu_parity.log, bench.log, results.jsonl, profile_ops.txt,
# gpu_harness.log, sanitizer.log (build.log instead of the rest when the
# build fails). RC_SESSION_SANITIZER=0 leaves the sanitizer test out;
# RC_SESSION_STOP_ON_FAIL=1 stops after a failing cuda_ops (saves device time).
set -u
OUT="${OUT:-/tmp/gpu_session}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# a carried binary was built against another HDF5 1.10.x patch release (same ABI)
export HDF5_DISABLE_VERSION_CHECK=2
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
B="${RC_BUILD:-build}"
S="$OUT/session.log"
log() { echo "== $(date +%T) $*" | tee -a "$S"; }

log "start on $(nvidia-smi -L 2> /dev/null | head -1)"
probe="/tmp/rc_probe.$$"
if ! { [ -x "$B/resumecheck" ] && ! ldd "$B/resumecheck" | grep -q "not found" &&
  "$B/resumecheck" train --steps 2 --save-at 1 --out "$probe" > /dev/null 2>&1; }; then
  log "carried build $B unusable here: building"
  B=build
  { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build "$B" -j16 --target resumecheck test_cuda_ops gpu_parity sanitizer_control; } > "$OUT/build.log" 2>&1 ||
    { log "build failed"; tail -30 "$OUT/build.log" | tee -a "$S"; exit 1; }
fi
rm -rf "$probe"
log "binaries: $B"

log "cuda_ops"
timeout 150 "$B/tests/test_cuda_ops" > "$OUT/cuda_ops.log" 2>&1
rc_ops=$?
echo "cuda_ops exit $rc_ops" | tee -a "$S"
grep -E "FAIL|attention (fp32|bf16) B=|checks" "$OUT/cuda_ops.log" | head -40 | tee -a "$S"
if [ "$rc_ops" != 0 ] && [ "${RC_SESSION_STOP_ON_FAIL:-0}" = 1 ]; then
  log "stopping: cuda_ops failed (RC_SESSION_STOP_ON_FAIL=1)"
  exit 1
fi

log "gpu_parity"
timeout 60 "$B/tests/gpu_parity" > "$OUT/gpu_parity.log" 2>&1
echo "gpu_parity exit $?" | tee -a "$S"
grep -E "FAIL|attention|parity" "$OUT/gpu_parity.log" | tee -a "$S"

log "bench"
# three interleaved rounds of eager vs the core: eager's tokens/s swings with
# the host CPU (70k-114k in round four), so the verdict is a median of pairs
RC_BIN="$B/resumecheck" OUT=/tmp BENCH_MODES="${BENCH_MODES:-eager}" \
  BENCH_CORE="${BENCH_CORE:-default}" BENCH_TIMEOUT="${BENCH_TIMEOUT:-100}" \
  BENCH_REPEAT="${BENCH_REPEAT:-3}" BENCH_STEPS="${BENCH_STEPS:-10}" \
  bash bench/bench_gpu.sh > "$OUT/bench.log" 2>&1
cp /tmp/bench_gpu/results.jsonl "$OUT/results.jsonl" 2> /dev/null
tail -9 "$OUT/bench.log" | tee -a "$S"

log "per-op profile (RC_PROFILE=ops, gpu-small, 4 steps)"
RC_PROFILE=ops timeout 90 "$B/resumecheck" train --preset gpu-small --device cuda --steps 4 \
  --out /tmp/rc_prof > /dev/null 2> "$OUT/profile_ops.txt"
head -30 "$OUT/profile_ops.txt" | tee -a "$S"

log "gpu_harness"
RC_BIN="$B/resumecheck" RC_SRC="$PWD" RC_FIXTURES="$PWD/fixtures" timeout 200 \
  bash tests/gpu_harness.sh > "$OUT/gpu_harness.log" 2>&1
echo "gpu_harness exit $?" | tee -a "$S"
grep -E "^(ok|FAIL)" "$OUT/gpu_harness.log" | tee -a "$S"

log "attention peer (PyTorch SDPA at gpu-small's shape)"
timeout 60 python3 bench/torch_attention.py 2>&1 | tail -1 | tee -a "$S"

if [ "${RC_SESSION_SANITIZER:-1}" = 1 ]; then
  log "gpu_sanitizer (compute-sanitizer memcheck + racecheck)"
  RC_BIN="$B/resumecheck" timeout 300 bash tests/gpu_sanitizer.sh > "$OUT/sanitizer.log" 2>&1
  echo "gpu_sanitizer exit $?" | tee -a "$S"
  grep -E "^(ok|FAIL)" "$OUT/sanitizer.log" | tee -a "$S"
fi
log "done"
