#!/usr/bin/env bash
# bench_io.sh — the checkpoint writer against dd, and file hashing against
# `openssl dgst -sha256` and `sha256sum`, on the same disk and the same
# number of bytes. Not a test: it times things; results go in
# bench/NOTES_io.md.
#
#   writer:  rc_checkpoint_save of a GIB-GiB float32 state (build the HDF5
#            image in memory, SHA-256 it and every tensor, write + fsync +
#            rename + fsync dir, manifest, COMPLETE)
#            vs dd if=/dev/zero of=F bs=1M count=N conv=fdatasync
#   hashing: rc_sha256_file vs openssl dgst -sha256 vs sha256sum on the
#            shard just written (page cache warm for all three)
#   also:    rc_checkpoint_load of the same checkpoint, rc_sha256_hex in memory
# Hash and load timings are the best of REPS runs.
#
# usage: bench/bench_io.sh [BUILD_DIR] [WORK_DIR]
#   BUILD_DIR  a built tree with librc.a (default: build-io)
#   WORK_DIR   where the files go (default: mktemp -d under $TMPDIR or /tmp)
#   env: GIB (default 1), REPS (default 5), KEEP=1 keeps WORK_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build-io}" && pwd)
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/rc_bench_io_XXXXXX")}
gib=${GIB:-1}
reps=${REPS:-5}
bytes=$((gib << 30))
mib=$((gib << 10))
[ -f "$build/librc.a" ] || { echo "no $build/librc.a: build first" >&2; exit 1; }
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

echo "== disk"
df -h "$work"
avail=$(df -B1 --output=avail "$work" | tail -1)
[ "$avail" -gt $((3 * bytes)) ] || { echo "need $((3 * gib)) GiB free in $work" >&2; exit 1; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), sha_ni: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no)"
echo "hdf5: $(pkg-config --modversion hdf5 2>/dev/null || echo "see build"), openssl: $(openssl version)"

# HDF5 flags from pkg-config, else from the build's CMake cache.
if h5c=$(pkg-config --cflags hdf5 2>/dev/null) && h5l=$(pkg-config --libs hdf5 2>/dev/null); then :; else
  h5lib=$(sed -n 's/^HDF5_C_LIBRARY_hdf5:FILEPATH=//p' "$build/CMakeCache.txt")
  h5inc=$(dirname "$(find /usr/include /usr/local/include -name hdf5.h 2>/dev/null | head -1)")
  h5c="-I$h5inc"; h5l="$h5lib"
fi
cc -O2 -std=c11 -Wall -Wextra -Werror -D_DEFAULT_SOURCE -I"$src/src" $h5c "$src/bench/bench_io.c" \
  -o "$work/bench_io" "$build/librc.a" $h5l -lcrypto -lpthread -lm

now() { date +%s.%N; }
best() { sort -g | head -1; }
# time_cmd CMD...: wall seconds of one run
time_cmd() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b-a}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }

# The disk of a shared VM swings between fast and slow phases, so dd and
# the writer alternate run by run and both best and median are reported.
echo "== write $gib GiB: dd and rc_checkpoint_save alternating, $reps runs each"
: >"$work/dd.t"; : >"$work/save.t"
for i in $(seq "$reps"); do
  rm -f "$work/dd.bin"; sync
  time_cmd dd if=/dev/zero of="$work/dd.bin" bs=1M count="$mib" conv=fdatasync >>"$work/dd.t"
  rm -f "$work/dd.bin"
  rm -rf "$work/ckpt"; sync
  "$work/bench_io" save "$work/ckpt" "$bytes" | sed -n 's/^seconds=\([0-9.]*\).*/\1/p' >>"$work/save.t"
  echo "  run $i: dd $(tail -1 "$work/dd.t") s, save $(tail -1 "$work/save.t") s"
done
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
dd_t=$(best <"$work/dd.t"); save_t=$(best <"$work/save.t")
dd_m=$(median <"$work/dd.t"); save_m=$(median <"$work/save.t")
shard="$work/ckpt/iter_0001000/shard_00000_of_00001.h5"
echo "dd conv=fdatasync:    best ${dd_t} s, median ${dd_m} s"
echo "rc_checkpoint_save:   best ${save_t} s, median ${save_m} s  (shard $(stat -c %s "$shard") bytes)"
echo "writer / dd:          best $(ratio "$save_t" "$dd_t")x, median $(ratio "$save_m" "$dd_m")x   (goal <= 1.25)"

echo "== hash the $gib GiB shard, warm cache (best of $reps)"
cat "$shard" >/dev/null
rc_t=$(for i in $(seq "$reps"); do "$work/bench_io" hash "$shard" | sed -n 's/^seconds=\([0-9.]*\).*/\1/p'; done | best)
ossl_t=$(for i in $(seq "$reps"); do time_cmd openssl dgst -sha256 "$shard"; done | best)
sum_t=$(for i in $(seq "$reps"); do time_cmd sha256sum "$shard"; done | best)
a=$("$work/bench_io" hash "$shard" | sed -n 's/.*sha256=//p')
b=$(openssl dgst -sha256 -r "$shard" | cut -d' ' -f1)
c=$(sha256sum "$shard" | cut -d' ' -f1)
[ "$a" = "$b" ] && [ "$b" = "$c" ] || { echo "hashes disagree: $a $b $c" >&2; exit 1; }
mem=$("$work/bench_io" memhash "$bytes")
echo "rc_sha256_file:       ${rc_t} s"
echo "openssl dgst -sha256: ${ossl_t} s"
echo "sha256sum:            ${sum_t} s"
echo "rc / openssl:         $(ratio "$rc_t" "$ossl_t")x   (goal <= 1.00)"
echo "rc / sha256sum:       $(ratio "$rc_t" "$sum_t")x"
echo "rc_sha256_hex in memory: $mem"

echo "== load $gib GiB (read, size + SHA-256 check, parse from memory, copy out; best of $reps)"
load_t=$(for i in $(seq "$reps"); do
  "$work/bench_io" load "$work/ckpt/iter_0001000" "$bytes" | sed -n 's/^seconds=\([0-9.]*\).*/\1/p'
done | best)
echo "rc_checkpoint_load:   ${load_t} s"
