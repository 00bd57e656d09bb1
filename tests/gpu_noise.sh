#!/usr/bin/env bash
# gpu_noise.sh — the CUDA core made not bitwise deterministic on purpose
# (RC_CUDA_SUM_ORDER=atomic: the embedding backward by atomicAdd, in the
# order the blocks run, as PyTorch's does on CUDA; kernels/cuda_embedding.cu)
# under `run --noise calibrated` (docs/design.md §7.2). Skips without a GPU.
#   - the switch is real: two legs write different shards (control: without
#     it, the same bytes), and args.json records it;
#   - a correct configuration passes "within run-to-run noise" (exit 0)
#     while judged byte for byte it fails A/A (exit 2: the control);
#   - the seed's legacy policy exceeds the noise (exit 1), and a census bug
#     fails at once, exactly.
source "$(dirname "$0")/run_lib.sh"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
digest() { find "$1" -name '*.h5' | sort | xargs cat | sha256sum | cut -c1-16; }
for r in 1 2; do
  RC_CUDA_SUM_ORDER=atomic "$RC_BIN" train --device cuda --steps 4 --save-at 4 --out "$T/atomic$r" >/dev/null 2>&1 ||
    fail "atomic leg $r failed"
  "$RC_BIN" train --device cuda --steps 4 --save-at 4 --out "$T/fixed$r" >/dev/null 2>&1 || fail "fixed leg $r failed"
done
[ "$(digest "$T/atomic1")" != "$(digest "$T/atomic2")" ] || fail "RC_CUDA_SUM_ORDER=atomic: two legs wrote the same bytes"
[ "$(digest "$T/fixed1")" = "$(digest "$T/fixed2")" ] || fail "control: without the switch two legs differ"
grep -q '"RC_CUDA_SUM_ORDER"' "$T/atomic1/ckpt/iter_0000004/args.json" || fail "args.json does not record the switch"

export RC_CUDA_SUM_ORDER=atomic
run_rc clean --device cuda --steps 8 --save-at 4 --noise calibrated --out "$T/clean" --progress off
expect_rc 0 "a correct configuration under the switch" clean
json_true "$T/clean/report.json" "d['verdict'] == 'within-noise'" "within-noise"
json_true "$T/clean/report.json" "any(c['judged'] == 'noise' and c['status'] == 'noise-measured' for c in d['checks'])" \
  "the A/A pairs measured noise"
run_rc bytes --device cuda --steps 8 --save-at 4 --aa --out "$T/bytes" --progress off
expect_rc 2 "control: the same configuration byte for byte (A/A fails)" bytes
run_rc seed --device cuda --steps 8 --save-at 4 --noise calibrated --precision bf16 --mtp-repeated-layer \
  --first-microbatch-policy legacy --out "$T/seed" --progress off
expect_rc 1 "the seed's legacy policy under the noise" seed
contains "$T/seed.out" "exceeds run-to-run noise by"
run_rc census --device cuda --steps 8 --save-at 4 --noise calibrated --inject optimizer-step-not-saved \
  --out "$T/census" --progress off
expect_rc 1 "a census bug, exactly" census
contains "$T/census.out" "RESUME diverged at the resume point (an exact check, whatever the noise)"
finish
