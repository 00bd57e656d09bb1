#!/usr/bin/env bash
# ckpt_golden.sh — the bytes of the model's checkpoints do not change by
# accident. Each config below is trained and saved, and the SHA-256 of every
# file a save writes (shards, manifest.json, COMPLETE) is compared with
# fixtures/shards/SHA256SUMS (args.json aside: it records the run, not the
# state), taken with the binary of an earlier commit
# (its README says which): a rewrite of the save path (the streamed save, the
# staging buffer) must give exactly the bytes the old one gave. Negative
# control: the same config with an injected bug that changes saved state
# (moments stored as bf16 values) must miss its entry.
#   ckpt_golden.sh            compare with the stored sums
#   ckpt_golden.sh --write F  write the sums of this binary to F
source "$(dirname "$0")/run_lib.sh"
need_train
SUMS="$(dirname "$0")/../fixtures/shards/SHA256SUMS"

# name | flags (the leg saves at every step listed)
CONFIGS=(
  "tiny_fp32|--preset tiny --steps 4 --save-at 2,4"
  "tiny_bf16_mtp_repeated|--preset tiny --precision bf16 --mtp-repeated-layer --steps 3 --save-at 3"
  "tiny_fp8_persist|--preset tiny --precision fp8 --first-microbatch-policy persist --steps 3 --save-at 3"
  "tiny_fp16_dropout|--preset tiny --precision fp16 --dropout 0.1 --steps 3 --save-at 3"
  "tiny_single|--preset tiny --collectives single --steps 3 --save-at 3"
  "tiny_chunks|--preset tiny --steps 2 --save-at 2 RC_TEST_CHUNK_BYTES=65536"
)

sums_of() { # name flags...: trains into $T/name and prints "sha  name/relative-path"
  local name=$1
  shift
  local env=() args=()
  for a in "$@"; do
    case $a in RC_*=*) env+=("$a") ;; *) args+=("$a") ;; esac
  done
  env "${env[@]}" "$RC_BIN" train "${args[@]}" --out "$T/$name" >"$T/$name.log" 2>&1 ||
    { echo "TRAIN-FAILED $name: $(tail -1 "$T/$name.log")"; return; }
  # args.json is not state: it records the run (binary, backend, paths)
  (cd "$T/$name/ckpt" && find . -type f ! -name args.json | LC_ALL=C sort | xargs sha256sum) |
    sed "s|  \./|  $name/|"
}

all_sums() {
  for c in "${CONFIGS[@]}"; do
    # shellcheck disable=SC2086
    sums_of "${c%%|*}" ${c#*|}
  done
}

if [ "${1:-}" = --write ]; then
  all_sums >"$2"
  echo "wrote $(wc -l <"$2") sums to $2"
  exit 0
fi
[ -f "$SUMS" ] || fail "missing $SUMS"
all_sums >"$T/got"
if ! diff -u "$SUMS" "$T/got" >"$T/diff"; then
  cat "$T/diff" >&2
  fail "checkpoint bytes differ from fixtures/shards/SHA256SUMS"
  finish
fi
echo "ok: $(wc -l <"$T/got") checkpoint files byte-identical to the stored sums"
# negative control: state that differs must miss the stored sums
sums_of bf16_moments --preset tiny --steps 4 --save-at 2,4 --inject moments-saved-in-bf16 |
  sed 's|bf16_moments/|tiny_fp32/|' >"$T/control"
grep -q "shard_00000_of_00001.h5" "$T/control" || fail "control: no shard"
if grep -F -x -q -f <(grep shard_ "$T/control") "$SUMS"; then
  fail "control: a shard with bf16-rounded moments matches the stored sums"
fi
echo "ok: control (moments saved in bf16) differs from the stored sums"
finish
