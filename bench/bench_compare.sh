#!/usr/bin/env bash
# bench_compare.sh — `resumecheck compare` on a pair of identical ~1 GiB
# checkpoints, timed in one run against what else could settle the pair:
#   verify   the default: every shard of both sides read and its SHA-256
#            checked against its manifest (one thread per shard), then the
#            verified manifests settle the pair;
#   trust    --trust-manifests: manifests only, no shard byte read;
#   h5diff   h5diff a.h5 b.h5 (reads and compares every element);
#   sha256   `openssl dgst -sha256` of the two shards, one process (the cost
#            of the hashing alone, serial) and two at once (parallel);
#   cmp      `cmp` of the two shards (a byte compare without hashing).
# Then, for reference, the pair that differs in one float32 element.
# Not a test: it times things; results go in bench/NOTES_compare.md.
#
# The checkpoints are written by the io layer itself (rc_checkpoint_save,
# through a small generator compiled here against the build's librc.a), so
# they carry real manifests. Warm page cache (every file is read once before
# timing); each command runs $REPS times, timed with date +%s.%N, median kept.
#
# usage: bench/bench_compare.sh [BUILD_DIR] [WORK_DIR]
#   BUILD_DIR  a configured and built tree (default: build-cpu)
#   WORK_DIR   where the 3 GiB of checkpoints go (default: mktemp -d)
#   env: GIB (checkpoint size, default 1), REPS (default 5), KEEP=1 keeps WORK_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build-cpu}" && pwd)
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/rc_bench_compare_XXXXXX")}
gib=${GIB:-1}
reps=${REPS:-5}
bin=$build/resumecheck
[ -x "$bin" ] || { echo "no $bin: build first" >&2; exit 1; }
command -v h5diff >/dev/null || { echo "h5diff not installed" >&2; exit 1; }
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

# ---- the generator: N tensors of 64 MiB of float32 noise. flip 1: one bit
# of one element of tensor 9 flipped; flip 2: the lowest bit of every
# element flipped (the worst case for describing a difference). Same seed,
# same bytes.
cat > "$work/gen.c" <<'GEN'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/sha256.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: gen CKPT_ROOT GIB flip(0|1|2)\n");
    return 64;
  }
  const int64_t per = (int64_t)16 << 20; /* floats per tensor: 64 MiB */
  int n = atoi(argv[2]) * 16;
  int flip = atoi(argv[3]);
  rc_state st = {0};
  float **bufs = calloc((size_t)n, sizeof *bufs);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < n; t++) {
    bufs[t] = malloc((size_t)per * sizeof(float));
    if (!bufs[t]) return 70;
    for (int64_t i = 0; i < per; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      bufs[t][i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    }
    char path[128];
    snprintf(path, sizeof path, "/model/layers/%d/mlp/fc1/weight", t);
    int64_t shape[2] = {4096, 4096};
    rc_state_add(&st, path, RC_DT_F32, 2, shape, bufs[t]);
  }
  for (int t = 0; flip == 2 && t < n; t++)
    for (int64_t i = 0; i < per; i++) {
      uint32_t u;
      memcpy(&u, &bufs[t][i], 4);
      u ^= 1u;
      memcpy(&bufs[t][i], &u, 4);
    }
  if (flip == 1) {
    uint32_t u;
    memcpy(&u, &bufs[9 % n][123457], 4);
    u ^= 1u;
    memcpy(&bufs[9 % n][123457], &u, 4);
  }
  const char *config = "{\"bench\":true}";
  char sha[RC_SHA256_HEX];
  rc_sha256_hex(config, strlen(config), sha);
  rc_shard_meta meta = {RC_SHARD_FORMAT_VERSION, 0, 1, 1, config, sha};
  rc_err err = {0};
  int rc = rc_checkpoint_save(argv[1], &meta, &st, "{\"leg\":\"bench\"}\n", &err);
  if (rc) fprintf(stderr, "gen: %s\n", err.msg);
  return rc;
}
GEN
h5inc=$(find /usr/include -name hdf5.h -printf '%h\n' 2>/dev/null | head -1)
h5lib=$(dirname "$(find /usr/lib /usr/lib64 -name 'libhdf5.so' 2>/dev/null | grep -v mpi | head -1)")
cc -O2 -std=c11 -D_DEFAULT_SOURCE -I"$src/src" -I"$src" -I"$h5inc" "$work/gen.c" "$build/librc.a" \
  -L"$h5lib" -lhdf5 -lcrypto -lpthread -lm -o "$work/gen"

flips=(0 0 1)
names=(a b c)
for i in 0 1 2; do
  [ -f "$work/${names[$i]}/iter_0000001/COMPLETE" ] && continue
  "$work/gen" "$work/${names[$i]}" "$gib" "${flips[$i]}"
done
shard=iter_0000001/shard_00000_of_00001.h5
ls -l "$work"/{a,b,c}/$shard
cmp -s "$work/a/$shard" "$work/b/$shard" || { echo "a and b should be identical" >&2; exit 1; }
cat "$work"/{a,b,c}/$shard >/dev/null # warm the page cache

# median wall time of REPS runs of a command; prints "secs exit"
median() {
  local ts=() code=0 t0 t1
  for _ in $(seq "$reps"); do
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 && code=0 || code=$?
    t1=$(date +%s.%N)
    ts+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
  done
  printf '%.3f %d' "$(printf '%s\n' "${ts[@]}" | sort -g | sed -n "$(((reps + 1) / 2))p")" "$code"
}
sha_both() { # the two shards hashed at once, one openssl process each
  openssl dgst -sha256 "$1" >/dev/null &
  openssl dgst -sha256 "$2" >/dev/null
  wait
}

A=$work/a/iter_0000001 B=$work/b/iter_0000001 C=$work/c/iter_0000001
echo "$(nproc) CPUs; $gib GiB per shard; median of $reps; warm page cache; $(h5diff --version | head -1)"
echo "resumecheck startup (--help): $(median "$bin" compare --help | cut -d' ' -f1) s"
"$bin" compare "$A" "$B" | tail -3
"$bin" compare --trust-manifests "$A" "$B" | tail -2
v=$(median "$bin" compare "$A" "$B")
t=$(median "$bin" compare --trust-manifests "$A" "$B")
h=$(median h5diff "$A/shard_00000_of_00001.h5" "$B/shard_00000_of_00001.h5")
s1=$(median openssl dgst -sha256 "$A/shard_00000_of_00001.h5" "$B/shard_00000_of_00001.h5")
s2=$(median sha_both "$A/shard_00000_of_00001.h5" "$B/shard_00000_of_00001.h5")
c=$(median cmp "$A/shard_00000_of_00001.h5" "$B/shard_00000_of_00001.h5")
ratio() { awk -v a="${1% *}" -v b="${2% *}" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-52s %7s s (exit %s)\n' "identical: compare (verify, default)" "${v% *}" "${v#* }" \
  "identical: compare --trust-manifests" "${t% *}" "${t#* }" \
  "identical: h5diff" "${h% *}" "${h#* }" \
  "identical: openssl dgst -sha256, both shards, serial" "${s1% *}" "${s1#* }" \
  "identical: openssl dgst -sha256, both shards, parallel" "${s2% *}" "${s2#* }" \
  "identical: cmp" "${c% *}" "${c#* }"
echo "ratios: h5diff / verify $(ratio "$h" "$v")x (target >= 5); h5diff / trust $(ratio "$h" "$t")x;" \
  "verify / parallel sha256 $(ratio "$v" "$s2")x; verify / serial sha256 $(ratio "$v" "$s1")x"
# the pair that differs in one element: verify both shards, then the slow path
v1=$(median "$bin" compare "$A" "$C")
h1=$(median h5diff "$A/shard_00000_of_00001.h5" "$C/shard_00000_of_00001.h5")
printf '%-52s %7s s (exit %s)\n' "one element different: compare (verify)" "${v1% *}" "${v1#* }" \
  "one element different: h5diff" "${h1% *}" "${h1#* }"
echo "ratio: h5diff / verify $(ratio "$h1" "$v1")x"
