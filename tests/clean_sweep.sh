#!/usr/bin/env bash
# clean_sweep.sh — no false alarms: `resumecheck run` on >= 50 distinct
# correct configurations of the tiny preset on the CPU, every one exit 0.
# The configurations are precision (fp32, bf16, fp16, fp16 that overflows,
# fp8) x policy (resolve, persist) x fusion (on, off) x 3 variants, each
# variant rotating MTP depth and layer sharing, MoE (the preset's sigmoid
# layer, dense, softmax on both layers), dropout, microbatches and the save
# points (5, 1, 9, the chain 3,6, auto, every); the catalogue's
# overflowing fp16 configuration with --save-at auto; and data read in
# epochs (--epoch-samples), saved at and between epoch boundaries, so that
# the census's derived fields (the sampler's epoch among them) are held to
# no false alarm there too; and the MTP lifecycle's settings (docs/design.md
# §3.5: token- and sequence-level losses normalised per microbatch or at the
# finish, detached MTP heads with their own clip) across precisions, MoE
# and save points, their census fields compared as well.
# Negative control: the same check on a configuration of the sweep with a
# planted bug (--inject) must report the failure, so the sweep cannot pass
# by not looking.
set -u
: "${RC_BIN:?RC_BIN is not set}"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

PRECS=("--precision fp32" "--precision bf16" "--precision fp16 --loss-scale-window 3"
  "--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2"
  "--precision fp8")
POLICIES=(resolve persist)
FUSIONS=(on off)
MTPS=("--mtp-depths 0 --mtp-separate-layers" "--mtp-depths 1" "--mtp-depths 2 --mtp-repeated-layer"
  "--mtp-depths 2 --mtp-separate-layers")
MOES=("" "--moe-layers none" "--moe-layers 0,1 --moe-scoring softmax")
DROPOUTS=("" "--dropout 0.1")
MICROS=("--microbatches 2" "--microbatches 1" "--microbatches 3")
SAVES=("--save-at 5" "--save-at 1" "--save-at 9" "--save-at 3,6" "--save-at auto" "--save-at 5")

configs=()
i=0
for prec in "${PRECS[@]}"; do
  for pol in "${POLICIES[@]}"; do
    for fus in "${FUSIONS[@]}"; do
      for v in 0 1 2; do
        save=${SAVES[$((i % 6))]}
        # one configuration of the overflowing fp16 row saves at every step
        [ $i = 40 ] && save="--save-at every"
        configs+=("$prec --first-microbatch-policy $pol --grad-accum-fusion $fus ${MTPS[$((i % 4))]} ${MOES[$((i % 3))]} ${DROPOUTS[$(((i / 3) % 2))]} ${MICROS[$(((i / 2) % 3))]} $save")
        i=$((i + 1))
      done
    done
  done
done

# the catalogue's overflowing fp16 configuration itself (clean_fp16_overflow: skips at
# 3, 4, 7, 8, asserted by fp16_overflow_skips), with the points auto chooses for it
OVER="--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2"
configs+=("$OVER --save-at auto" "$OVER --warmup 0 --save-at auto")
# data epochs: of 3 steps saved at every step (boundaries 3, 6, 9 among them), of 7 steps
# with auto (7 ends one), of 2 steps in fp16 chained at 3 and 6
EPOCHS=("--epoch-samples 12 --save-at every" "--epoch-samples 28 --save-at auto"
  "--precision fp16 --loss-scale-window 3 --epoch-samples 8 --save-at 3,6")
configs+=("${EPOCHS[@]}")
# the MTP lifecycle (seed 004)
SEQ_DET="--loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.02 --save-at 3,6"
MTPLIFE=("--loss-type token-level --save-at auto"
  "--calculate-per-token-loss --mtp-detach-heads --save-at every"
  "$SEQ_DET"
  "--precision fp32 --loss-type sequence-level --mtp-detach-heads --loss-normalize-at finish --moe-aux-loss-coeff 0 --save-at 5"
  "--precision fp16 --loss-scale-window 3 --calculate-per-token-loss --save-at auto"
  "--precision fp8 --loss-type token-level --mtp-detach-heads --save-at 5"
  "--loss-type sequence-level --mtp-depths 0 --mtp-separate-layers --moe-layers 0,1 --moe-scoring softmax --save-at 1"
  "--loss-type sequence-level --mtp-loss-scale 0 --dropout 0.1 --microbatches 3 --save-at 9")
configs+=("${MTPLIFE[@]}")

# sweep_one FLAGS: 0 when `run` exits 0 (identical); prints one line
sweep_one() {
  local n=$1
  shift
  # shellcheck disable=SC2086 # the flags are words
  "$RC_BIN" run $* --steps 10 --out "$t/c$n" --jobs 2 --progress off >"$t/c$n.out" 2>&1
  local rc=$?
  rm -rf "$t/c$n"
  if [ $rc = 0 ]; then
    echo "ok      $*"
    return 0
  fi
  echo "FAIL    exit $rc: $*"
  grep -E "verdict|diverged|failed" "$t/c$n.out" | head -5 | sed 's/^/        /'
  return 1
}

fail=0
distinct=$(printf '%s\n' "${configs[@]}" | tr -s ' ' | sort -u | wc -l)
[ "$distinct" -ge 50 ] || { echo "FAIL: only $distinct distinct configurations"; fail=1; }
printf '%s\n' "${configs[@]}" | grep -qx -- "$OVER --save-at auto" ||
  { echo "FAIL: the overflowing fp16 configuration with --save-at auto is not in the sweep"; fail=1; }
n=0 bad=0
for c in "${configs[@]}"; do
  n=$((n + 1))
  sweep_one "$n" $c || bad=$((bad + 1))
done
echo "clean sweep: $distinct distinct configurations, $bad false alarm(s)"
[ $bad = 0 ] || fail=1

# negative control: planted bugs in configurations of the sweep are reported
plant() {
  local base=$1 bug=$2
  if sweep_one "planted-$bug" $base --inject "$bug" >"$t/planted.txt"; then
    echo "FAIL: negative control: --inject $bug in '$base' passed the sweep's check"
    fail=1
  else
    echo "negative control: --inject $bug reported: $(head -1 "$t/planted.txt")"
  fi
}
for c in "${configs[@]}"; do
  case "$c" in
  *"--dropout 0.1"*"--save-at 5"*) dropout_5=$c ;;
  esac
done
plant "$OVER --warmup 0 --save-at auto" hysteresis-not-saved
plant "$dropout_5" save-draws-rng
plant "--epoch-samples 28 --save-at auto" sampler-epoch-not-set-after-resume
plant "$SEQ_DET" mtp-denominator-from-main-after-resume
exit $fail
