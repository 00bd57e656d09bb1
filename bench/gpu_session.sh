#!/usr/bin/env bash
# gpu_session.sh — one GPU-machine session in one call: correctness first,
# then throughput, then where the time goes. Device time is scarce (one
# short lease per session), so everything runs from one command and every
# result lands in $OUT as it is produced (a run cut short still reports).
#
#   OUT=/dir RC_BUILD=build-dev bash bench/gpu_session.sh
#
# RC_BUILD is a build directory made elsewhere (CUDA arch 90, no MPI: the
# GPU image has none; targets as below, the man page and completion
# included, since core_cuda_module installs it); if its binaries cannot run here (missing libraries, an
# HDF5 that refuses them), the tree is configured and built here instead.
# Files written to $OUT (at most 8: what the GPU machine hands back): session.log,
# cuda_ops.log, gpu_parity.log, bench.log, results.jsonl, profile_ops.txt,
# gpu_harness.log, sanitizer.log (build.log instead of the rest when the
# build fails); parts outside the default add their own (variants.txt, ncu.txt, ...). RC_SESSION_SANITIZER=0 leaves the sanitizer test out;
# RC_SESSION_STOP_ON_FAIL=1 stops after a failing cuda_ops (saves device time).
# RC_SESSION_PARTS (default "ops parity bench profile harness attention
# sanitizer") picks the parts; "module" runs core_cuda_module, "verdict"
# bench/bench_verdict.sh on gpu-small, "save" bench/bench_save.sh when present,
# "rootcause" compute-sanitizer on an events-on leg of $RC_OLD_BIN (a build
# from before the bisect fix) and of this build, "compare" compare of two
# gpu-small checkpoints against --trust-manifests, h5diff and openssl,
# "oldbytes" CUDA checkpoints of $RC_OLD_GPU_BUILD (binary and module of an
# earlier commit) against this build's, file by file, "census" the state
# census's cost and --save-at auto (bench/bench_census.sh), "peers" the core
# against whole-model torch.compile and the other PyTorch peers
# (bench/bench_peers.sh; PEER_SHAPES, PEER_MODES, PEER_ROUNDS pass through),
# "startup" the save leg alone and beside each other leg (bench/bench_startup.sh),
# "pin" what page-locking and unlocking a staging buffer costs (bench/bench_pin.cu),
# "loadscan" the pieces of a verified load under the load's thread knobs,
# "fp8" the seed's fp8 cells and gpu-small fp8 A/A (tests/gpu_fp8_matrix.sh), "noise"
# the CUDA nondeterministic switch under run --noise calibrated (tests/gpu_noise.sh),
# "profile_fp8" the per-op profile at --precision fp8, "variants" the event-timed
# op rows and checkpoint digest under the build's CUDA module and each variant
# module in $RC_VARIANTS (bench/build_variants.sh), interleaved rounds, one table,
# "switches" cuda_ops, the gpu-small digests and the event-timed rows of the ops opt-in
# switches have touched (6-step dense and MoE legs), under each set in RC_SWITCH_SETS
# (e.g. "none|RC_CUDA_GEMM_PINS=0"; an opt-in is measured this way before it becomes
# the default or goes),
# "plans" the GEMM plans of a MoE leg (bench/gemm_plan_summary.sh), "gemmalgos"
# every heuristic algorithm of a set of GEMM shapes timed (bench/bench_gemm_algos.cu;
# RC_GEMM_SET: gpu-small, the default, dense16, experts, router or all), "grouped" one MoE layer's
# expert GEMMs per expert against cuBLAS's grouped GEMM (bench/bench_grouped_gemm.cu), "ncu"
# Nsight Compute sections of kernels (RC_NCU_KERNELS: regexes, one run each), "kernels"
# every kernel of a 2-step leg timed by Nsight Compute and summed by name (RC_KERNELS_FLAGS),
# "probe" the wgmma operand layouts (bench/wgmma_probe.cu), "ncusass" one
# kernel's per-instruction samples (RC_NCU_KERNEL, a regex) as SASS in CSV.
# RC_PROFILE_FLAGS: flags added to the profile part's leg (e.g. --moe-layers none);
# RC_PROFILE_MODE: "ops" (default, synchronised) or "events" (event-timed).
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
  # RC_CUTLASS_TGZ: CUTLASS's include directory packed (the GPU image has no
  # PyPI to install nvidia-cutlass from); RC_CMAKE_ARGS: more configure flags
  cutlass=()
  if [ -f "${RC_CUTLASS_TGZ:-}" ]; then
    mkdir -p /tmp/rc_cutlass && tar xzf "$RC_CUTLASS_TGZ" -C /tmp/rc_cutlass &&
      cutlass=(-DRC_CUTLASS_INCLUDE=/tmp/rc_cutlass)
  fi
  # shellcheck disable=SC2086
  { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DRC_WITH_MPI=OFF \
    "${cutlass[@]}" ${RC_CMAKE_ARGS:-} &&
    # the man page and completion too: core_cuda_module installs the tree
    man=$(grep -q '^RC_HELP2MAN:FILEPATH=/' "$B/CMakeCache.txt" && echo resumecheck_man)
    cmake --build "$B" -j"$(nproc)" --target resumecheck resumecheck_cuda test_cuda_ops gpu_parity \
      sanitizer_control resumecheck_completion $man; } > "$OUT/build.log" 2>&1 ||
    { log "build failed"; tail -30 "$OUT/build.log" | tee -a "$S"; exit 1; }
fi
rm -rf "$probe"
log "binaries: $B"
# the test programs live in $B/tests, not beside the CUDA module
export RC_CUDA_MODULE="$PWD/$B/libresumecheck_cuda.so"
case "$B" in /*) RC_CUDA_MODULE="$B/libresumecheck_cuda.so" ;; esac
PARTS=" ${RC_SESSION_PARTS:-ops parity bench profile harness attention sanitizer} "
# "correctness": the batch every GPU change must pass, one command under 10
# minutes: the module loads, cuda_ops, whole-step parity, the verifier on CUDA
# (A/A dense and MoE, the seed, bisect), the fp8 cells and fp8 A/A, the
# nondeterministic switch under the calibrated verdict, the MTP lifecycle's
# configurations ("mtp": tests/gpu_mtp_lifecycle.sh)
PARTS="${PARTS/ correctness / module ops parity harness fp8 noise mtp }"
want() { [[ "$PARTS" == *" $1 "* ]]; }
# bench_prog NAME [NVCC FLAGS...]: the path of bench program NAME, the one the
# build made ($B/bench, CMakeLists.txt) or else compiled here into /tmp
bench_prog() {
  local name=$1
  shift
  if [ -x "$B/bench/$name" ]; then
    echo "$B/bench/$name"
  else
    nvcc -O2 -std=c++20 "$@" -Isrc -Ikernels -o "/tmp/rc_$name" "bench/$name.cu" -lcublasLt -lcublas >&2 &&
      echo "/tmp/rc_$name"
  fi
}

if want rootcause; then
  log "root cause: compute-sanitizer memcheck on an events-on leg (bisect's through replay)"
  ev=(train --device cuda --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy
    --steps 6 --events /tmp/rc_rc.events --events-from-step 6)
  if [ -n "${RC_OLD_SRC:-}" ] && [ -z "${RC_OLD_BIN:-}" ]; then
    log "building the old tree $RC_OLD_SRC"
    { cmake -S "$RC_OLD_SRC" -B /tmp/rc_old_build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DRC_WITH_MPI=OFF && cmake --build /tmp/rc_old_build -j16 --target resumecheck; } > /tmp/rc_old_build.log 2>&1 &&
      RC_OLD_BIN=/tmp/rc_old_build/resumecheck || tail -5 /tmp/rc_old_build.log | tee -a "$S"
  fi
  for bin in "${RC_OLD_BIN:-}" "$B/resumecheck"; do
    [ -n "$bin" ] && [ -x "$bin" ] || continue
    rm -rf /tmp/rc_rc
    timeout 240 compute-sanitizer --tool memcheck --print-limit 3 "$bin" "${ev[@]}" --out /tmp/rc_rc \
      > /tmp/rc_rc.log 2>&1
    echo "$bin: exit $?; $(grep -c 'Invalid' /tmp/rc_rc.log) invalid-access reports" | tee -a "$S"
    grep -E "Invalid|at .*0x|by thread|Address|ERROR SUMMARY|fingerprint|Host Frame" /tmp/rc_rc.log | head -14 | tee -a "$S"
  done
fi
if want module; then
  log "core_cuda_module (the module loads for a CUDA leg only)"
  RC_BIN="$B/resumecheck" timeout 120 bash tests/core_cuda_module.sh 2>&1 | tail -5 | tee -a "$S"
fi

if want ops; then
log "cuda_ops"
timeout 150 "$B/tests/test_cuda_ops" > "$OUT/cuda_ops.log" 2>&1
rc_ops=$?
echo "cuda_ops exit $rc_ops" | tee -a "$S"
grep -E "FAIL|attention (fp32|bf16) B=|checks" "$OUT/cuda_ops.log" | head -40 | tee -a "$S"
if [ "$rc_ops" != 0 ] && [ "${RC_SESSION_STOP_ON_FAIL:-0}" = 1 ]; then
  log "stopping: cuda_ops failed (RC_SESSION_STOP_ON_FAIL=1)"
  exit 1
fi
fi

if want parity; then
log "gpu_parity"
timeout 60 "$B/tests/gpu_parity" > "$OUT/gpu_parity.log" 2>&1
echo "gpu_parity exit $?" | tee -a "$S"
grep -E "FAIL|attention|parity" "$OUT/gpu_parity.log" | tee -a "$S"
fi

if want bench; then
log "bench"
# three interleaved rounds of eager vs the core: eager's tokens/s swings with
# the host CPU (70k-114k in round four), so the verdict is a median of pairs
RC_BIN="$B/resumecheck" OUT=/tmp BENCH_MODES="${BENCH_MODES:-eager}" \
  BENCH_CORE="${BENCH_CORE:-default}" BENCH_TIMEOUT="${BENCH_TIMEOUT:-100}" \
  BENCH_REPEAT="${BENCH_REPEAT:-3}" BENCH_STEPS="${BENCH_STEPS:-10}" \
  bash bench/bench_gpu.sh > "$OUT/bench.log" 2>&1
cp /tmp/bench_gpu/results.jsonl "$OUT/results.jsonl" 2> /dev/null
tail -9 "$OUT/bench.log" | tee -a "$S"
fi

if want profile; then
log "per-op profile (RC_PROFILE=${RC_PROFILE_MODE:-ops}, gpu-small, 4 steps; \$RC_PROFILE_FLAGS: ${RC_PROFILE_FLAGS:-})"
RC_PROFILE="${RC_PROFILE_MODE:-ops}" timeout 90 "$B/resumecheck" train --preset gpu-small --device cuda --steps 4 \
  ${RC_PROFILE_FLAGS:-} --out /tmp/rc_prof > /dev/null 2> "$OUT/profile_ops.txt"
grep -v '^profile: memory:' "$OUT/profile_ops.txt" | head -40 | tee -a "$S"
grep '^profile: memory:' "$OUT/profile_ops.txt" | head -30 | tee -a "$S"
fi

if want variants; then
  # the same binary with the build's own CUDA module ("base") and each module
  # of $RC_VARIANTS (a directory of .so or .so.gz files from
  # bench/build_variants.sh: one kernel file's tuning constants changed), in RC_VARIANT_ROUNDS
  # interleaved rounds (default 2): the event-timed op rows of a 6-step
  # gpu-small leg (RC_VARIANT_FLAGS, default MoE; "--moe-layers none" for
  # dense) and the digest of its checkpoint at step 6 (a variant meant to be
  # bitwise the same must give base's). RC_VARIANT_OPS (variant names, or
  # "all") runs cuda_ops under those modules too: for a variant meant to
  # change bits, or whose kernel the default module's cuda_ops never runs. One throwaway leg first:
  # the first leg on a fresh machine ran some ops up to 6x slow (session 17).
  read -ra vflags <<< "${RC_VARIANT_FLAGS:-}"
  timeout 60 "$B/resumecheck" train --preset gpu-small --device cuda --steps 2 \
    --out /tmp/rc_var_warm > /dev/null 2>&1
  mods=("base=$(cd "$B" && pwd)/libresumecheck_cuda.so")
  mkdir -p /tmp/rc_variants
  for so in "${RC_VARIANTS:-$B/var}"/*.so "${RC_VARIANTS:-$B/var}"/*.so.gz; do
    [ -f "$so" ] || continue
    v=$(basename "${so%.gz}" .so)
    if [ "${so%.gz}" != "$so" ]; then # packed by build_variants.sh: unpacked here
      gzip -dc "$so" > "/tmp/rc_variants/$v.so" || continue
      so=/tmp/rc_variants/$v.so
    fi
    mods+=("$v=$(cd "$(dirname "$so")" && pwd)/$(basename "$so")")
  done
  for m in "${mods[@]}"; do
    v=${m%%=*}
    [ "${RC_VARIANT_OPS:-}" = all ] || [[ " ${RC_VARIANT_OPS:-} " == *" $v "* ]] || continue
    RC_CUDA_MODULE="${m#*=}" timeout 240 "$B/tests/test_cuda_ops" > "/tmp/rc_var_ops_$v.log" 2>&1
    echo "variant $v cuda_ops exit $?: $(tail -1 "/tmp/rc_var_ops_$v.log")" | tee -a "$S"
    grep -E "^FAIL" "/tmp/rc_var_ops_$v.log" | head -5 | tee -a "$S"
  done
  : > "$OUT/variants.txt"
  for round in $(seq 1 "${RC_VARIANT_ROUNDS:-2}"); do
    for m in "${mods[@]}"; do
      v=${m%%=*}
      log "variant $v, round $round: RC_PROFILE=events, 6 steps, save at 6 ${vflags[*]}"
      rm -rf /tmp/rc_var
      RC_CUDA_MODULE="${m#*=}" RC_PROFILE=events timeout 120 "$B/resumecheck" train \
        --preset gpu-small --device cuda --steps 6 --save-at 6 "${vflags[@]}" --out /tmp/rc_var \
        > /dev/null 2> "/tmp/rc_var_$v.txt"
      grep -E "^  [a-z_0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%$" "/tmp/rc_var_$v.txt" |
        sed "s/^/$v r$round /" >> "$OUT/variants.txt"
      if [ -n "$(find /tmp/rc_var -name '*.h5' 2> /dev/null)" ]; then
        echo "$v r$round digest $(find /tmp/rc_var -name '*.h5' | sort | xargs cat | sha256sum | cut -c1-16)"
      else
        echo "$v r$round: the leg wrote no shards ($(tail -1 "/tmp/rc_var_$v.txt"))"
      fi | tee -a "$S" "$OUT/variants.txt"
    done
  done
  # per op, each variant's median ms a call over the rounds (and its ratio to base's)
  python3 bench/variants_table.py "$OUT/variants.txt" | tee -a "$S"
fi

if want switches; then
  # the same build under each set of environment switches in RC_SWITCH_SETS
  # ("|"-separated sets, each a space-separated list of VAR=value, "none"
  # for none): cuda_ops, the 4-step gpu-small digests (dense and MoE: a
  # switch meant to change no bit must give the same hashes) and the
  # event-timed rows of the ops the opt-ins touch, 6-step dense and MoE legs
  IFS='|' read -ra sets <<< "${RC_SWITCH_SETS:-none}"
  for set in "${sets[@]}"; do
    sw=()
    [ "$set" = none ] || read -ra sw <<< "$set"
    tag=$(echo "$set" | tr ' =' '_-')
    env "${sw[@]}" timeout 240 "$B/tests/test_cuda_ops" > "/tmp/rc_sw_ops_$tag.log" 2>&1
    echo "[$set] cuda_ops exit $?: $(tail -1 "/tmp/rc_sw_ops_$tag.log")" | tee -a "$S"
    grep -E "^FAIL" "/tmp/rc_sw_ops_$tag.log" | head -5 | tee -a "$S"
    for shape in dense moe; do
      flags=(--preset gpu-small --device cuda --steps 4 --save-at 4)
      [ $shape = dense ] && flags+=(--moe-layers none)
      rm -rf /tmp/rc_sw
      env "${sw[@]}" timeout 120 "$B/resumecheck" train "${flags[@]}" --out /tmp/rc_sw > /dev/null 2>&1
      if [ -n "$(find /tmp/rc_sw -name '*.h5' 2> /dev/null)" ]; then
        echo "[$set] $shape digest $(find /tmp/rc_sw -name '*.h5' | sort | xargs cat | sha256sum | cut -c1-16)"
      else
        echo "[$set] $shape: the leg wrote no shards"
      fi | tee -a "$S"
    done
    for shape in dense moe; do
      flags=(--preset gpu-small --device cuda --steps 6)
      [ $shape = dense ] && flags+=(--moe-layers none)
      rm -rf /tmp/rc_sw_p
      env "${sw[@]}" RC_PROFILE=events timeout 120 "$B/resumecheck" train "${flags[@]}" \
        --out /tmp/rc_sw_p > /dev/null 2> "/tmp/rc_sw_prof_$tag.txt"
      grep -E "^  (cross_entropy|embedding_backward|rmsnorm_backward|rmsnorm_forward|attention_backward|to_device|gemm_half_many|gemm|zero|zero_many|moe_[a-z_]+|cast_half|add|total|fp32) " \
        "/tmp/rc_sw_prof_$tag.txt" | sed "s/^/[$set] $shape /" | tee -a "$S"
    done
  done
fi

if want probe; then
  # the wgmma operand layouts the Hopper attention relies on, each alone
  # (bench/wgmma_probe.cu: against the host, and S against mma.sync bit for bit)
  log "wgmma probe"
  probe_bin=$(bench_prog wgmma_probe -gencode arch=compute_90a,code=sm_90a) &&
    timeout 30 "$probe_bin" 2>&1 | tee -a "$S"
fi

if want ncu; then
  # Nsight Compute on kernels of a dense gpu-small leg, one ncu run per name
  # in RC_NCU_KERNELS (a regex each; the third launch of it): speed of
  # light, occupancy, warp states, the memory and compute pipes
  : > "$OUT/ncu.txt"
  for k in ${RC_NCU_KERNELS:-attention_bf16_forward attention_bf16_dkv attention_bf16_dq_reduce}; do
    log "ncu: $k"
    timeout 120 ncu -k "regex:$k" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis "$B/resumecheck" train \
      --preset gpu-small --moe-layers none --device cuda --steps 2 --out /tmp/rc_ncu \
      >> "$OUT/ncu.txt" 2>&1
    echo "ncu exit $?" | tee -a "$S"
  done
  grep -E "^  [a-z_ ]*(void )?[a-z_]+(<[0-9]+>)?\(|Duration|Compute \(SM\) Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|highest-utilized|Issue Slots Busy" \
    "$OUT/ncu.txt" | cut -c1-160 | tee -a "$S"
fi

if want kernels; then
  # every kernel of a 2-step gpu-small leg timed by Nsight Compute (one
  # metric, one replay each: ~35 s for an MoE leg), summed by name: where
  # the GPU's time goes, GEMM algorithms and glue kernels included.
  # RC_KERNELS_FLAGS: the leg's flags (e.g. --moe-layers none); ncu's clocks
  # are its own (locked), so compare rows with each other, not with step times
  log "ncu kernel durations (2-step gpu-small leg ${RC_KERNELS_FLAGS:-})"
  # shellcheck disable=SC2086
  timeout 300 ncu --metrics gpu__time_duration.sum --csv "$B/resumecheck" train --preset gpu-small \
    --device cuda --steps 2 ${RC_KERNELS_FLAGS:-} --out /tmp/rc_kern 2> /dev/null > /tmp/rc_kern.csv
  echo "ncu exit $?" | tee -a "$S"
  python3 - /tmp/rc_kern.csv << 'EOF' > "$OUT/kernels.txt"
import collections, csv, re, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))][1:]
total, count = collections.Counter(), collections.Counter()
for r in rows:
    name = re.sub(r"\(.*", "", r[4])[:80]
    total[name] += float(r[-1].replace(",", "")) / 1e3
    count[name] += 1
print("# %d kernels, %.0f us under ncu (2 steps, the first with the model's set-up)"
      % (len(rows), sum(total.values())))
print("%10s %6s %9s  %s" % ("us", "calls", "us/call", "kernel"))
for name, us in total.most_common(60):
    print("%10.1f %6d %9.1f  %s" % (us, count[name], us / count[name], name))
EOF
  head -25 "$OUT/kernels.txt" | tee -a "$S"
fi

if want ncusass; then
  # Nsight Compute's per-instruction warp-state samples (SourceCounters) of
  # the first kernel matching $RC_NCU_KERNEL in a dense gpu-small leg (its
  # third launch), as SASS with counts and stall reasons: ncusass.csv.gz.
  # What found session 20's generic shared accesses, copy loop and branches.
  log "ncu per-instruction samples: ${RC_NCU_KERNEL:-attention_wgmma_dkv}"
  timeout 200 ncu -f -k "regex:${RC_NCU_KERNEL:-attention_wgmma_dkv}" --launch-skip 2 \
    --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    -o /tmp/rc_ncusass "$B/resumecheck" train --preset gpu-small --moe-layers none \
    --device cuda --steps 2 --out /tmp/rc_ncu > /dev/null 2>&1
  echo "ncu exit $?" | tee -a "$S"
  ncu -i /tmp/rc_ncusass.ncu-rep --page source --csv --print-source sass 2> /dev/null |
    gzip > "$OUT/ncusass.csv.gz"
  ncu -i /tmp/rc_ncusass.ncu-rep --page details 2>&1 | grep -E "Duration|Throughput|Issue" |
    tee -a "$S"
fi

if want plans; then
  log "GEMM plans of a gpu-small MoE leg (12 steps): by source and host time"
  RC_BIN="$B/resumecheck" timeout 120 bash bench/gemm_plan_summary.sh --preset gpu-small \
    --steps 12 2>&1 | tee -a "$S"
fi

if want gemmalgos; then
  log "every heuristic algorithm for the GEMM shapes of ${RC_GEMM_SET:-gpu-small} (bench/bench_gemm_algos.cu)"
  bga=$(bench_prog bench_gemm_algos -arch=sm_90) &&
    timeout 240 "$bga" 20 "${RC_GEMM_SET:-gpu-small}" > "$OUT/gemm_algos.txt" 2>&1
  echo "bench_gemm_algos exit $?" | tee -a "$S"
fi

if want grouped; then
  log "one MoE layer's expert GEMMs: per-expert cuBLASLt against cuBLAS's grouped GEMM (bench/bench_grouped_gemm.cu)"
  bgg=$(bench_prog bench_grouped_gemm -arch=sm_90) &&
    timeout 120 "$bgg" 20 > "$OUT/grouped_gemm.txt" 2>&1
  echo "bench_grouped_gemm exit $?" | tee -a "$S"
fi

if want profile_fp8; then
log "per-op profile at fp8 (RC_PROFILE=ops, gpu-small --precision fp8, 4 steps)"
RC_PROFILE=ops timeout 90 "$B/resumecheck" train --preset gpu-small --precision fp8 --device cuda \
  --steps 4 --out /tmp/rc_prof8 > /dev/null 2> "$OUT/profile_ops_fp8.txt"
head -30 "$OUT/profile_ops_fp8.txt" | tee -a "$S"
fi

if want fp8; then
log "gpu_fp8_matrix (the seed's fp8 cells on cuBLASLt FP8, gpu-small fp8 A/A)"
RC_BIN="$B/resumecheck" RC_SRC="$PWD" timeout 420 \
  bash tests/gpu_fp8_matrix.sh > "$OUT/gpu_fp8_matrix.log" 2>&1
echo "gpu_fp8_matrix exit $?" | tee -a "$S"
grep -E "^(ok|FAIL)|cells" "$OUT/gpu_fp8_matrix.log" | tail -40 | tee -a "$S"
fi

if want harness; then
log "gpu_harness"
RC_BIN="$B/resumecheck" RC_SRC="$PWD" RC_FIXTURES="$PWD/fixtures" timeout 300 \
  bash tests/gpu_harness.sh > "$OUT/gpu_harness.log" 2>&1
echo "gpu_harness exit $?" | tee -a "$S"
grep -E "^(ok|FAIL)" "$OUT/gpu_harness.log" | tee -a "$S"
fi

if want mtp; then
  log "gpu_mtp_lifecycle (detached heads, token/sequence denominators, both orders, A/A and RESUME)"
  RC_BIN="$B/resumecheck" timeout 300 bash tests/gpu_mtp_lifecycle.sh > "$OUT/gpu_mtp_lifecycle.log" 2>&1
  echo "gpu_mtp_lifecycle exit $?" | tee -a "$S"
  grep -E "^(ok|FAIL)" "$OUT/gpu_mtp_lifecycle.log" | tee -a "$S"
fi
if want noise; then
  log "gpu_noise (RC_CUDA_SUM_ORDER=atomic under run --noise calibrated)"
  RC_BIN="$B/resumecheck" RC_SRC="$PWD" timeout 400 bash tests/gpu_noise.sh > "$OUT/gpu_noise.log" 2>&1
  echo "gpu_noise exit $?" | tee -a "$S"
  grep -E "^(ok|FAIL)" "$OUT/gpu_noise.log" | tee -a "$S"
fi
if want verdict; then
log "verdict vs one leg (gpu-small, 20 steps, save at 10)"
RC_BIN="$B/resumecheck" FLAGS="--preset gpu-small --device cuda" N=20 K=10 \
  REPEAT="${VERDICT_REPEAT:-2}" SCHEDULING="${VERDICT_SCHEDULING:-hashes full}" \
  timeout 420 bash bench/bench_verdict.sh 2>&1 | tee -a "$S"
fi
if want startup; then
log "what the legs of a verdict cost the save leg (bench/bench_startup.sh, gpu-small)"
RC_BIN="$B/resumecheck" FLAGS="--preset gpu-small --device cuda" N=20 K=10 \
  REPEAT="${STARTUP_REPEAT:-2}" timeout 300 bash bench/bench_startup.sh 2>&1 | tee -a "$S"
fi
if want peers; then
  log "the core against the PyTorch peers a user would pick (bench/bench_peers.sh)"
  OUT=/tmp/rc_peers RC_BIN="$B/resumecheck" bash bench/bench_peers.sh > /tmp/rc_peers.log 2>&1
  tail -n 16 /tmp/rc_peers.log | tee -a "$S"
  cp /tmp/rc_peers/bench_peers/results.jsonl "$OUT/peers.jsonl" 2> /dev/null
fi
if want census; then
log "state census cost and --save-at auto (tiny on the CPU, gpu-small on the GPU)"
RC_BIN="$B/resumecheck" FLAGS="--preset tiny --device cpu" N=20 K=10 REPEAT=3 \
  timeout 200 bash bench/bench_census.sh 2>&1 | tee -a "$S"
RC_BIN="$B/resumecheck" FLAGS="--preset gpu-small --device cuda" N=20 K=10 REPEAT=2 \
  timeout 300 bash bench/bench_census.sh 2>&1 | tee -a "$S"
fi
if want save && [ -f bench/bench_save.sh ]; then
log "save and load vs dd (gpu-small checkpoint)"
RC_BIN="$B/resumecheck" BENCH_FLAGS="--preset gpu-small --device cuda" timeout 300 \
  bash bench/bench_save.sh 2>&1 | tail -20 | tee -a "$S"
fi

if want profile_io; then
  # where a save and a load go (RC_PROFILE=1 notes), in steady state: the
  # leg saves at 10 and 12; then a resume from 10
  log "save and load pieces (RC_PROFILE=1, gpu-small)"
  pw=/tmp/rc_profile_io
  rm -rf "$pw"
  RC_PROFILE=1 timeout 120 "$B/resumecheck" train --device cuda --preset gpu-small --steps 12 \
    --save-at 10,12 --out "$pw/s" 2>&1 | grep -E "save|init|staging" | tee -a "$S"
  grep -E "^(save|model_init|backend|step),(1|10|11|12)?," "$pw/s/timing.csv" | tee -a "$S"
  RC_PROFILE=1 timeout 120 "$B/resumecheck" train --device cuda --preset gpu-small --steps 12 \
    --resume-from "$pw/s/ckpt/iter_0000010" --out "$pw/r" 2>&1 | grep -E "load|init" | tee -a "$S"
  grep -E "^(load|model_init|backend|start_to_first_step)," "$pw/r/timing.csv" | tee -a "$S"
  rm -rf "$pw"
fi

if want oldbytes && [ -n "${RC_OLD_GPU_BUILD:-}" ]; then
  # The save path changed (streamed through a page-locked staging buffer):
  # CUDA legs of the old and the new binary must write the same bytes.
  log "CUDA checkpoints of $RC_OLD_GPU_BUILD vs this build"
  ob=/tmp/rc_oldbytes
  rm -rf "$ob"
  n_same=0 n_diff=0
  while IFS='|' read -r name flags; do
    read -r -a f <<<"$flags"
    RC_CUDA_MODULE="$PWD/$RC_OLD_GPU_BUILD/libresumecheck_cuda.so" timeout 120 \
      "$RC_OLD_GPU_BUILD/resumecheck" train --device cuda "${f[@]}" --out "$ob/old_$name" > "$ob.old.log" 2>&1 ||
      { log "old $name failed: $(tail -1 "$ob.old.log")"; continue; }
    timeout 120 "$B/resumecheck" train --device cuda "${f[@]}" --out "$ob/new_$name" > "$ob.new.log" 2>&1 ||
      { log "new $name failed: $(tail -1 "$ob.new.log")"; continue; }
    for fo in $(cd "$ob/old_$name/ckpt" && find . -type f ! -name args.json | sort); do
      if cmp -s "$ob/old_$name/ckpt/$fo" "$ob/new_$name/ckpt/$fo"; then
        n_same=$((n_same + 1))
      else
        n_diff=$((n_diff + 1))
        log "DIFFERS: $name $fo"
      fi
    done
    rm -rf "$ob/old_$name" "$ob/new_$name"
  done <<'EOF2'
tiny_bf16_mtp|--preset tiny --precision bf16 --mtp-repeated-layer --steps 3 --save-at 2,3
tiny_fp8|--preset tiny --precision fp8 --steps 3 --save-at 3
gpu_small|--preset gpu-small --steps 2 --save-at 1,2
EOF2
  log "old vs new CUDA checkpoint files: $n_same identical, $n_diff different"
fi

if want loadscan; then
  # where a verified load of gpu-small's checkpoint goes (page cache warm):
  # a leg that loads at once under the load's knobs, and one that reserves
  # page-locked staging first (--wait-for-checkpoint of a complete
  # checkpoint); against cat and one openssl SHA-256 stream of the shard
  log "load scan (RC_PROFILE=1 load pieces under RC_LOAD_THREADS / RC_LOAD_FOLLOW_THREADS)"
  lw=/tmp/rc_loadscan
  rm -rf "$lw"
  timeout 120 "$B/resumecheck" train --device cuda --preset gpu-small --steps 2 --stop-at 1 --save-at 1 \
    --out "$lw/s" > /dev/null 2>&1 || log "could not make the checkpoint"
  sh=$lw/s/ckpt/iter_0000001/shard_00000_of_00001.h5
  for r in 1 2; do
    t0=$(date +%s.%N); cat "$sh" > /dev/null; t1=$(date +%s.%N)
    echo "cat $(python3 -c "print('%.3f' % ($t1 - $t0))") s" | tee -a "$S"
  done
  t0=$(date +%s.%N); openssl dgst -sha256 "$sh" > /dev/null; t1=$(date +%s.%N)
  echo "openssl dgst -sha256 (one stream) $(python3 -c "print('%.3f' % ($t1 - $t0))") s" | tee -a "$S"
  scan() { # label env... -- extra train flags
    local label=$1; shift
    local envs=() extra=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    extra=("$@")
    for r in 1 2; do
      rm -rf "$lw/r"
      env RC_PROFILE=1 "${envs[@]}" timeout 120 "$B/resumecheck" train --device cuda --preset gpu-small \
        --steps 2 "${extra[@]}" --resume-from "$lw/s/ckpt/iter_0000001" --out "$lw/r" 2> "$lw/err" > /dev/null
      echo "$label #$r: $(grep -E 'profile: load:' "$lw/err" | sed 's/profile: load: //' | tr '\n' ';') $(grep '^load,' "$lw/r/timing.csv")" | tee -a "$S"
    done
  }
  scan default
  scan checks-in-load RC_TEST_LOAD_CHECKS_DATASETS=1
  for v in ${LOADSCAN_MORE:-}; do # e.g. LOADSCAN_MORE="RC_LOAD_THREADS=8 RC_LOAD_FOLLOW_THREADS=0"
    scan "$v" "$v"
  done
  scan pinned -- --wait-for-checkpoint
  scan pinned-checks-in-load RC_TEST_LOAD_CHECKS_DATASETS=1 -- --wait-for-checkpoint
  rm -rf "$lw"
fi

if want pin; then
  log "page-locking a staging buffer: cudaHostAlloc vs mmap (+THP) + cudaHostRegister (bench/bench_pin.cu)"
  { pin_bin=$(bench_prog bench_pin -arch=sm_90) && timeout 120 "$pin_bin" 2.35; } 2>&1 | tee -a "$S"
fi

if want compare; then
log "compare of two gpu-small checkpoints (verify every byte) vs --trust-manifests, h5diff, openssl"
cw=/tmp/rc_cmp_bench
rm -rf "$cw" && mkdir -p "$cw"
timeout 120 "$B/resumecheck" train --preset gpu-small --device cuda --steps 2 --stop-at 1 --save-at 1 \
  --out "$cw/leg" > /dev/null 2>&1 || log "could not make the checkpoint"
a="$cw/leg/ckpt/iter_0000001"
cp -r "$a" "$cw/b"
h5=$(command -v h5diff || echo "$B/h5diff")
t() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; echo "rc=$? $(python3 -c "print('%.3f' % ($(date +%s.%N) - $t0))") s"; }
cat "$a"/*.h5 "$cw/b"/*.h5 > /dev/null # warm page cache, as after a run
for r in 1 2 3; do
  echo "round $r: compare $(t "$B/resumecheck" compare "$a" "$cw/b"); trust $(t "$B/resumecheck" compare --trust-manifests "$a" "$cw/b"); h5diff $(t "$h5" "$a"/shard_00000_of_00001.h5 "$cw/b"/shard_00000_of_00001.h5); openssl x2 $(t sh -c "openssl dgst -sha256 $a/*.h5 & openssl dgst -sha256 $cw/b/*.h5; wait")" | tee -a "$S"
done
"$B/resumecheck" compare "$a" "$cw/b" 2>&1 | tail -3 | tee -a "$S"
echo "shard bytes: $(stat -c %s "$a"/shard_00000_of_00001.h5), nproc $(nproc)" | tee -a "$S"
rm -rf "$cw"
fi

if want attention; then
log "attention peer (PyTorch SDPA at gpu-small's shape)"
timeout 60 python3 bench/torch_attention.py 2>&1 | tail -1 | tee -a "$S"
fi

if want sanitizer && [ "${RC_SESSION_SANITIZER:-1}" = 1 ]; then
  log "gpu_sanitizer (compute-sanitizer memcheck + racecheck)"
  RC_BIN="$B/resumecheck" timeout 300 bash tests/gpu_sanitizer.sh > "$OUT/sanitizer.log" 2>&1
  echo "gpu_sanitizer exit $?" | tee -a "$S"
  grep -E "^(ok|FAIL)" "$OUT/sanitizer.log" | tee -a "$S"
fi
log "done"
