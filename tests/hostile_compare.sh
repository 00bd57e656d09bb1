#!/usr/bin/env bash
# hostile_compare.sh — the hostile `compare` / `inspect` cases of issue 16,
# replayed on copies of fixtures/io/good (never the fixtures themselves):
#   1. a flipped shard byte beside manifests that still match: 65 naming
#      the shard and side B (control: --trust-manifests passes and says
#      "manifests identical; shard bytes not read"; the unflipped pair 0);
#   2. a ~2 KiB file declaring a never-written 1 TiB dataset (written by
#      compare_unit --make-sparse): compare, compare --deep and inspect end
#      at once with 65 naming the dataset (control: the same file declaring
#      64 bytes compares 1, inspects 0);
#   3. --ignore '*': "nothing compared", 66 (control: no --ignore, 0);
#   4. a shard replaced by garbage of the same size, --deep, with and
#      without manifests: 65 naming it (control: the intact pair, 0);
#   5. manifest.json a directory: 65 "is a directory";
#   6. a flipped byte under a version-2 manifest: 65 with the chunk's range;
#   7. a file libhdf5 itself crashes on: 65, compare survives.
# Each command runs under `timeout 60`: a hang is a failure (exit 124).
# No device nodes or FIFOs are needed.
set -u
: "${RC_BIN:?RC_BIN is not set}" "${RC_SRC:?RC_SRC is not set}"
MK="$(dirname "$RC_BIN")/tests/compare_unit"
[ -x "$MK" ] || MK="$(dirname "$RC_BIN")/compare_unit"
[ -x "$MK" ] || { echo "compare_unit not built: skipping"; exit 77; }
T=$(mktemp -d /tmp/rc_hostile_compare.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect CODE NEEDLE ARGS...: `resumecheck ARGS` exits CODE and prints NEEDLE ("" for none)
expect() {
  local want=$1 needle=$2
  shift 2
  timeout 60 "$RC_BIN" "$@" >"$T/out" 2>&1
  local got=$?
  [ "$got" = "$want" ] || { fail "resumecheck $*: exit $got, want $want"; sed 's/^/  | /' "$T/out" >&2; }
  [ -z "$needle" ] || grep -qF -- "$needle" "$T/out" || { fail "resumecheck $*: lacks '$needle'"; sed 's/^/  | /' "$T/out" >&2; }
}

good="$RC_SRC/fixtures/io/good/iter_0000005"
shard=shard_00000_of_00001.h5
for d in a b ga gb; do cp -r "$good" "$T/$d"; done

# 1. flipped byte, manifests equal
expect 0 "bytes read and verified against manifests" compare "$T/a" "$T/b"
size=$(stat -c %s "$T/b/$shard")
off=$((size / 2))
byte=$(od -An -tu1 -j "$off" -N1 "$T/b/$shard" | tr -d ' ')
printf "\\$(printf '%03o' $((byte ^ 1)))" | dd of="$T/b/$shard" bs=1 seek="$off" conv=notrunc status=none
cmp -s "$T/a/$shard" "$T/b/$shard" && fail "the byte was not flipped"
cmp -s "$T/a/manifest.json" "$T/b/manifest.json" || fail "the manifests should still be equal"
expect 65 "$T/b/$shard: its bytes do not match its manifest" compare "$T/a" "$T/b"
expect 65 "side B" compare --deep "$T/a" "$T/b"
expect 0 "manifests identical; shard bytes not read" compare --trust-manifests "$T/a" "$T/b"

# 2. sparse 1 TiB
"$MK" --make-sparse "$T" || { fail "compare_unit --make-sparse"; exit 1; }
expect 65 "dataset /model/w claims 1.0 TiB" compare "$T/sparse/a.h5" "$T/sparse/b.h5"
expect 65 "dataset /model/w claims 1.0 TiB" compare --deep "$T/sparse/a.h5" "$T/sparse/b.h5"
expect 65 "dataset /model/w claims 1.0 TiB" compare "$T/sparse/ca.h5" "$T/sparse/cb.h5"
expect 65 "dataset /model/w claims 1.0 TiB" inspect "$T/sparse/a.h5"
expect 1 "" compare "$T/sparse/small_a.h5" "$T/sparse/small_b.h5"
expect 0 "" inspect "$T/sparse/small_a.h5"

# 3. --ignore '*'
expect 66 "nothing compared" compare --ignore '*' "$T/a" "$T/ga"
# two files that differ, every object ignored (equal files stay IDENTICAL: their bytes were compared)
expect 66 "nothing compared" compare --ignore '*' "$T/a/$shard" "$T/b/$shard"
expect 0 "IDENTICAL" compare --ignore '*' "$T/a/$shard" "$T/ga/$shard"
expect 0 "IDENTICAL" compare "$T/a" "$T/ga"

# 4. garbage shard
head -c "$(stat -c %s "$T/gb/$shard")" /dev/urandom >"$T/garbage"
cp "$T/garbage" "$T/gb/$shard"
expect 65 "$T/gb/$shard" compare --deep "$T/ga" "$T/gb"
expect 65 "$T/gb/$shard" compare "$T/ga" "$T/gb"
mkdir -p "$T/na" "$T/nb"
cp "$T/ga/$shard" "$T/na/"
cp "$T/gb/$shard" "$T/nb/"
expect 65 "not an HDF5 file" compare --deep "$T/na" "$T/nb"

# 5. manifest.json that is a directory: named as such, 65 (it said "cannot
#    map ...: No such device", 74); control: the intact pair above, 0
cp -r "$good" "$T/md"
rm "$T/md/manifest.json"
mkdir "$T/md/manifest.json"
expect 65 "is a directory" compare "$T/a" "$T/md"

# 6. manifest version 2 (chunk hashes): a flipped byte is named with the
#    chunk's byte range, side B; control: the untouched copy is identical
RC_TEST_CHUNK_BYTES=4096 timeout 60 "$RC_BIN" train --steps 2 --save-at 2 --out "$T/v2" >/dev/null 2>&1 ||
  fail "train for the version-2 case failed"
v2="$T/v2/ckpt/iter_0000002"
cp -r "$v2" "$T/v2a"
cp -r "$v2" "$T/v2b"
expect 0 "IDENTICAL" compare "$T/v2a" "$T/v2b"
printf '\x5a' | dd of="$T/v2b/$shard" bs=1 seek=10000 conv=notrunc 2>/dev/null
expect 65 "bytes [8192, 12288)" compare "$T/v2a" "$T/v2b"
expect 65 "side B" compare "$T/v2a" "$T/v2b"
# the same flip on side A (B is compared with A while A is hashed): A is named
expect 65 "side A" compare "$T/v2b" "$T/v2a"

# 7. a crafted file on which libhdf5 1.10 itself segfaults (in H5A__close,
#    while the file is closed; found by fuzz_compare): compared in a child
#    process first, so compare reports it (65) instead of dying; control:
#    without the isolation (RC_TEST_COMPARE_UNISOLATED=1) the process dies
crafted="$RC_SRC/fixtures/fuzz/crashes/fuzz_compare/h5a_close_at_file_close"
tail -c +2 "$crafted" >"$T/crafted.h5" # the fuzz input's first byte is its option byte
expect 65 "libhdf5 crashed" compare "$T/a/$shard" "$T/crafted.h5"
(RC_TEST_COMPARE_UNISOLATED=1 timeout 60 "$RC_BIN" compare "$T/a/$shard" "$T/crafted.h5") >"$T/unisolated.out" 2>&1
r=$?
# a signal (>= 128), or a sanitizer build's report of one
{ [ "$r" -ge 128 ] && [ "$r" != 124 ]; } || grep -q "AddressSanitizer: SEGV" "$T/unisolated.out" ||
  fail "control: unisolated compare of the crafted file exited $r (libhdf5 no longer crashes? then the isolation is untested)"

[ "$fails" = 0 ] && echo "ok: flipped byte, sparse 1 TiB, --ignore '*', garbage shard, directory manifest, chunk hashes"
exit $((fails > 0))
