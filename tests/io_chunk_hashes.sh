#!/usr/bin/env bash
# io_chunk_hashes.sh — the manifest's chunk hashes, end to end through
# `resumecheck train`: each is the SHA-256 of its slice of the shard as dd
# and sha256sum see it (independently of the tool's own code), they do not
# change the shard's bytes, and a resume verifies every chunk: one flipped
# byte is 65 naming that chunk's byte range. The chunk size comes from the
# test-only RC_TEST_CHUNK_BYTES at save time and is recorded in the
# manifest; a load uses the manifest's, whatever the environment says.
# Negative controls: a shifted slice matches no recorded hash; the
# unflipped copy resumes.
set -uo pipefail
: "${RC_BIN:?}"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
C=1048576
S=shard_00000_of_00001.h5
RC_TEST_CHUNK_BYTES=$C "$RC_BIN" train --preset tiny --steps 2 --save-at 1 --out "$t/a" >/dev/null 2>&1 || { echo "FAIL: chunked save"; exit 1; }
"$RC_BIN" train --preset tiny --steps 2 --save-at 1 --out "$t/b" >/dev/null 2>&1 || { echo "FAIL: default save"; exit 1; }
d=$t/a/ckpt/iter_0000001
m=$d/manifest.json
size=$(stat -c %s "$d/$S")
n=$(( (size + C - 1) / C ))
[ "$n" -ge 3 ] || { echo "FAIL: want a shard of at least 3 chunks of $C bytes, it has $size bytes"; exit 1; }
grep -q "\"chunk_bytes\": $C," "$m" && ok "chunk_bytes $C recorded" || bad "chunk_bytes $C not in the manifest"
grep -q '"version": 2,' "$m" && ok "manifest version 2" || bad "manifest version is not 2"
sed -n '/"chunk_sha256": \[/,/\]/p' "$m" | grep -o '[0-9a-f]\{64\}' >"$t/recorded"
[ "$(wc -l <"$t/recorded")" = "$n" ] && ok "$n chunk hashes for $size bytes" || bad "$(wc -l <"$t/recorded") chunk hashes, want $n"
for ((k = 0; k < n; k++)); do dd if="$d/$S" bs=$C skip=$k count=1 status=none | sha256sum | cut -c1-64; done >"$t/dd"
cmp -s "$t/recorded" "$t/dd" && ok "every chunk hash is sha256sum of its dd slice" || bad "chunk hashes differ from dd | sha256sum"
# negative control: the slices one byte later match none
for ((k = 0; k < n; k++)); do dd if="$d/$S" bs=1 skip=$((k * C + 1)) count=$C status=none iflag=skip_bytes,count_bytes 2>/dev/null | sha256sum | cut -c1-64; done >"$t/shifted"
[ -z "$(comm -12 <(sort "$t/recorded") <(sort "$t/shifted"))" ] && ok "negative control: shifted slices match no chunk hash" || bad "a shifted slice matched a chunk hash"
grep -q "\"sha256\": \"$(sha256sum "$d/$S" | cut -c1-64)\"" "$m" && ok "whole-file sha256 still recorded" || bad "whole-file sha256 missing"
cmp -s "$d/$S" "$t/b/ckpt/iter_0000001/$S" && ok "shard bytes do not depend on the chunk size" || bad "chunked and default shards differ"
grep -q '"chunk_bytes": 67108864,' "$t/b/ckpt/iter_0000001/manifest.json" && ok "default chunk_bytes 64 MiB" || bad "default chunk_bytes not 67108864"

# resume: the control loads, with another chunk size in the environment
RC_TEST_CHUNK_BYTES=4096 "$RC_BIN" train --preset tiny --steps 2 --resume-from "$d" --out "$t/r0" >/dev/null 2>"$t/r0.err" \
  && ok "control: resume loads (the environment's chunk size is not used to read)" || { bad "control resume failed: $(cat "$t/r0.err")"; }
mkdir -p "$t/flip" && cp -r "$d" "$t/flip/iter_0000001"
k=$((n / 2)); at=$((k * C + C / 2)); end=$(( (k + 1) * C < size ? (k + 1) * C : size ))
printf '\x5a' | dd of="$t/flip/iter_0000001/$S" bs=1 seek=$at conv=notrunc status=none
cmp -s "$d/$S" "$t/flip/iter_0000001/$S" && bad "the flip changed nothing (pick another byte)"
"$RC_BIN" train --preset tiny --steps 2 --resume-from "$t/flip/iter_0000001" --out "$t/r1" >/dev/null 2>"$t/r1.err"
rc=$?
{ [ $rc = 65 ] && grep -q "bytes \[$((k * C)), $end)" "$t/r1.err" && grep -q "$S" "$t/r1.err"; } \
  && ok "flipped byte $at: 65 naming bytes [$((k * C)), $end)" || bad "flipped byte: rc $rc, $(cat "$t/r1.err")"
exit $fail
