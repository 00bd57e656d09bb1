#!/usr/bin/env bash
# bench_compare.sh — `resumecheck compare` against h5diff on two ≥1 GiB
# checkpoints: an identical pair and a pair that differs in one float32
# element. Not a test: it times things; results go in bench/NOTES_compare.md.
#
# The checkpoints are written by the io layer itself (rc_checkpoint_save,
# through a small generator compiled here against the build's librc.a), so
# they carry real manifests. Each compare is timed with a warm page cache
# (every file is read once before timing), best of $REPS runs.
#
# usage: bench/bench_compare.sh [BUILD_DIR] [WORK_DIR]
#   BUILD_DIR  a configured and built tree (default: build-cmp)
#   WORK_DIR   where the 3 GiB of checkpoints go (default: mktemp -d)
#   env: GIB (checkpoint size, default 1), REPS (default 3), KEEP=1 keeps WORK_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build-cmp}" && pwd)
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/rc_bench_compare_XXXXXX")}
gib=${GIB:-1}
reps=${REPS:-3}
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

flips=(0 0 1 2)
names=(a b c d)
for i in 0 1 2 3; do
  [ -f "$work/${names[$i]}/iter_0000001/COMPLETE" ] && continue
  "$work/gen" "$work/${names[$i]}" "$gib" "${flips[$i]}"
done
shard=iter_0000001/shard_00000_of_00001.h5
ls -l "$work"/{a,b,c,d}/$shard
cat "$work"/{a,b,c,d}/$shard > /dev/null # warm the page cache

# best-of-REPS wall time of a command, in seconds; prints "secs exit"
best() {
  local best_t="" code=0 t0 t1 t
  for _ in $(seq "$reps"); do
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 && code=0 || code=$?
    t1=$(date +%s.%N)
    t=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best_t" ] || [ "$(echo "$t < $best_t" | bc -l)" = 1 ]; then best_t=$t; fi
  done
  printf '%.3f %d' "$best_t" "$code"
}

row() { # label h5diff-result rc-result
  local h=${2% *} r=${3% *}
  printf '%-56s %8.3f s (exit %s)  h5diff %8.3f s (exit %s)  h5diff/resumecheck %6.1fx\n' \
    "$1" "$r" "${3#* }" "$h" "${2#* }" "$(echo "$h / $r" | bc -l)"
}

echo "sizes: $gib GiB per shard; best of $reps; warm page cache"
echo "resumecheck startup (--help): $(best "$bin" compare --help | cut -d' ' -f1) s"
for pair in "identical a b" "one-element-different a c"; do
  set -- $pair
  h=$(best h5diff "$work/$2/$shard" "$work/$3/$shard")
  row "$1: iter dirs (manifests)" "$h" "$(best "$bin" compare "$work/$2/iter_0000001" "$work/$3/iter_0000001")"
  row "$1: shard files (no manifest)" "$h" "$(best "$bin" compare "$work/$2/$shard" "$work/$3/$shard")"
  row "$1: iter dirs --deep (every dataset)" "$h" "$(best "$bin" compare --deep "$work/$2/iter_0000001" "$work/$3/iter_0000001")"
done
# Worst case for the slow path: every element differs (each one is then
# classified and measured). h5diff would print 2^28 lines; -q stops it at
# the first difference, so it gets no ratio here.
r=$(best "$bin" compare "$work/a/iter_0000001" "$work/d/iter_0000001")
h=$(best h5diff -q "$work/a/$shard" "$work/d/$shard")
printf '%-56s %8.3f s (exit %s)  h5diff -q %5.3f s (exit %s)\n' \
  "every-element-different: iter dirs (manifests)" "${r% *}" "${r#* }" "${h% *}" "${h#* }"
"$bin" compare "$work/a/iter_0000001" "$work/c/iter_0000001" || true
