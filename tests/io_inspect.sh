#!/usr/bin/env bash
# io_inspect.sh — `resumecheck inspect`: --help, usage errors and exit codes,
# the listing of a good shard (paths, dtypes, shapes, hashes equal to the
# manifest's), and rejection of files that are not readable HDF5.
set -uo pipefail
: "${RC_BIN:?}" "${IO_TEST_BIN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect CODE CMD...
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  [ "$got" -eq "$want" ] || { cat "$tmp/err" >&2; fail "$* exited $got, expected $want"; }
}

expect 0 "$RC_BIN" inspect --help
grep -q "usage: resumecheck inspect" "$tmp/out" || fail "--help prints usage on stdout"
expect 64 "$RC_BIN" inspect
expect 64 "$RC_BIN" inspect --bogus x.h5
expect 64 "$RC_BIN" inspect a.h5 b.h5
expect 66 "$RC_BIN" inspect "$tmp/nope.h5"
grep -q "nope.h5" "$tmp/err" || fail "missing file is named"

"$IO_TEST_BIN" save "$tmp/ck" >/dev/null || fail "save"
dir="$tmp/ck/iter_0000005"
shard="$dir/shard_00000_of_00001.h5"
expect 0 "$RC_BIN" inspect "$shard"
grep -q "format: resumecheck-shard" "$tmp/out" || fail "meta format listed"
grep -q "world_size: 1" "$tmp/out" || fail "world size listed"
grep -Eq "float32 +\[24, 8\] +[0-9a-f]{64}  /model/decoder/layers/0/attention/qkv/weight" "$tmp/out" \
  || fail "dataset line with dtype, shape, hash, path"
grep -Eq "int64 +\[\] +[0-9a-f]{64}  /optimizer/step" "$tmp/out" || fail "scalar listed as []"
# Every dataset hash inspect prints is the one the manifest records.
n=0
while read -r sha path; do
  grep -q "\"path\":\"$path\",\"sha256\":\"$sha\"" "$dir/manifest.json" \
    || fail "inspect's hash of $path is not the manifest's"
  n=$((n + 1))
done < <(grep -E '^  .* [0-9a-f]{64}  /' "$tmp/out" | awk '{print $(NF-1), $NF}')
[ "$n" -ge 10 ] || fail "only $n datasets listed"
filesha=$(sha256sum "$shard" | cut -d' ' -f1)
grep -q "sha256: $filesha" "$tmp/out" || fail "whole-file hash listed"

expect 65 "$RC_BIN" inspect "$dir/manifest.json"
grep -q "not a readable HDF5 file" "$tmp/err" || fail "non-HDF5 input message"
head -c 1000 "$shard" >"$tmp/trunc.h5"
expect 65 "$RC_BIN" inspect "$tmp/trunc.h5"
echo "inspect: ok"
