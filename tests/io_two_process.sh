#!/usr/bin/env bash
# io_two_process.sh — two separate processes, more than a second apart (so
# any time stamp would differ), save the same state: every file of the two
# checkpoints is byte-identical, for one rank and for two. Negative control:
# a one-element change gives a different shard. Then `h5dump -H` (another
# HDF5 reader) opens a shard and lists the dataset paths.
set -euo pipefail
: "${IO_TEST_BIN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for world in 1 2; do
  "$IO_TEST_BIN" save "$tmp/a$world" world $world experts 150
  sleep 1.1
  "$IO_TEST_BIN" save "$tmp/b$world" world $world experts 150
  da="$tmp/a$world/iter_0000005" db="$tmp/b$world/iter_0000005"
  n=0
  for f in "$da"/*; do
    cmp -s "$f" "$db/$(basename "$f")" || fail "world $world: $(basename "$f") differs between processes"
    n=$((n + 1))
  done
  [ "$n" -eq "$(ls "$db" | wc -l)" ] || fail "world $world: different file sets"
  echo "world $world: $n files byte-identical across two processes"
done

"$IO_TEST_BIN" save "$tmp/c" perturb experts 150
cmp -s "$tmp/a1/iter_0000005/shard_00000_of_00001.h5" "$tmp/c/iter_0000005/shard_00000_of_00001.h5" \
  && fail "negative control: a perturbed state gave the same shard"
cmp -s "$tmp/a1/iter_0000005/manifest.json" "$tmp/c/iter_0000005/manifest.json" \
  && fail "negative control: a perturbed state gave the same manifest"
echo "negative control: perturbed state differs"

"$IO_TEST_BIN" load "$tmp/a1/iter_0000005" experts 150 || fail "a checkpoint written by another process does not load"

if ! command -v h5dump >/dev/null; then
  echo "h5dump not installed: skipping the h5dump part"
  exit 0
fi
out=$(h5dump -H "$tmp/a1/iter_0000005/shard_00000_of_00001.h5")
for p in model/embedding/weight 'GROUP "layers"' optimizer/step 'GROUP "meta"' 'ATTRIBUTE "config_sha256"'; do
  leaf=${p##*/}
  grep -q "$leaf" <<<"$out" || fail "h5dump -H does not list $p"
done
grep -q 'DATASET "qkv"' <<<"$out" && fail "negative control: h5dump lists a dataset that does not exist"
echo "h5dump -H reads the shard and lists its datasets"
