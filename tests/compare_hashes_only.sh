#!/usr/bin/env bash
# compare_hashes_only.sh — `compare` of a hashes-only checkpoint (`train
# --save-hashes-at`: manifest with no whole-file hash, no shard) against a
# full one: equal state is identical by SHA-256 (chunk lists; when the
# chunk sizes differ, the full side's bytes hashed at the hashes-only
# side's chunk size); other state names each differing dataset as a sha256
# difference, "values not compared"; the full side's dataset hashes come
# from its bytes, so a manifest forged to claim equal datasets is caught
# (control: --trust-manifests takes the manifest's word and misses it).
# Also: both sides hashes-only (with other chunk sizes: by datasets alone,
# saying that the file's other bytes were not compared), a hashes-only
# directory holding a shard (65), and `inspect` of one. Each case has its
# control.
set -u
: "${RC_BIN:?RC_BIN is not set}" "${RC_SRC:?RC_SRC is not set}"
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipping"; exit 77; }
"$RC_BIN" train --steps 2 --dry-run >/dev/null 2>&1 || { echo "skip: no train"; exit 77; }
T=$(mktemp -d /tmp/rc_cmp_hashes.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# leg NAME [train flags]: a save at step 2 (of 4) into $T/NAME
leg() {
  local name=$1
  shift
  "$RC_BIN" train --steps 4 --stop-at 2 --save-at 2 --out "$T/$name" "$@" >"$T/$name.log" 2>&1 ||
    fail "train $name"
}
ck() { echo "$T/$1/ckpt/iter_0000002"; }
# cmp NAME WANT A B [flags]: compare A B --json, output in $T/NAME.{out,json}
cmp() {
  local name=$1 want=$2 a=$3 b=$4
  shift 4
  "$RC_BIN" compare "$a" "$b" --json "$T/$name.json" "$@" >"$T/$name.out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    fail "$name: exit $got, want $want"
    sed 's/^/  | /' "$T/$name.out" >&2
  fi
}
has() { grep -qF -- "$2" "$T/$1.out" || { fail "$1: output lacks: $2"; sed 's/^/  | /' "$T/$1.out" >&2; }; }
hasnt() { if grep -qF -- "$2" "$T/$1.out"; then fail "$1: output should not contain: $2"; fi; }
js() {
  python3 - "$T/$1.json" "$2" <<'PY' || fail "$1: JSON: $2"
import json, sys
d = json.load(open(sys.argv[1]))
diffs = [x for x in d.get("diffs", []) if x["failing"]]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
EMB=/model/embedding/word_embeddings/weight

export RC_TEST_CHUNK_BYTES=65536 # several chunks per shard
leg h --save-hashes-at 2
leg h2 --save-hashes-at 2
leg f
leg g --seed 2
leg g_hashes --seed 2 --save-hashes-at 2
unset RC_TEST_CHUNK_BYTES
leg f_onechunk
leg g_onechunk --seed 2
leg h_onechunk --save-hashes-at 2
# --min-loss-scale does nothing in fp32: the same datasets, another /meta config
leg m_onechunk --min-loss-scale 2
leg m_hashes_onechunk --min-loss-scale 2 --save-hashes-at 2
[ -e "$(ck h)/shard_00000_of_00001.h5" ] && fail "the hashes-only save wrote a shard"
# the hashes-only manifest records no whole-file sha256, the full one does
# (its chunk and dataset hashes are the full save's: io_unit)
python3 - "$(ck h)/manifest.json" "$(ck f)/manifest.json" <<'PY' || fail "whole-file sha256: absent in the hashes-only manifest, present in the full one"
import json, sys
h, f = (json.load(open(p))["shards"][0] for p in sys.argv[1:])
sys.exit(0 if "sha256" not in h and len(f["sha256"]) == 64 and h["chunk_sha256"] == f["chunk_sha256"] else 1)
PY

# equal state: identical by SHA-256
cmp same 0 "$(ck h)" "$(ck f)"
has same "IDENTICAL"
has same "decided by SHA-256, values not compared"
has same '"hashes_only": one side kept hashes only'
js same "d['pairs_by_sha256_hashes_only'] == 1 and d['hashes_only_sides'] == 'A' and d['shards_verified'] == 1"
# other state: every differing dataset named, by SHA-256
cmp other 1 "$(ck h)" "$(ck g)"
has other "SHA-256 differs (A kept hashes only: values not compared)"
js other "any(x['kind'] == 'sha256' and x['object'] == '$EMB' for x in diffs)"
js other "not any(x['kind'] == 'values' for x in diffs)"
js other "any('chunk' in x['detail'] and 'bytes [' in x['detail'] for x in diffs)"
cmp reversed 1 "$(ck g)" "$(ck h)"
has reversed "B kept hashes only"
# chunk sizes differ: the full side's bytes hashed at A's chunk size, so
# the whole file is still compared (byte-identical, no "not compared" note)
cmp rechunksame 0 "$(ck h)" "$(ck f_onechunk)"
js rechunksame "d['files_identical'] >= 1 and not any('not compared (' in x['detail'] for x in d['diffs'])"
hasnt rechunksame "layout) not compared"
cmp rechunkother 1 "$(ck h)" "$(ck g_onechunk)"
js rechunkother "any(x['kind'] == 'sha256' and x['object'] == '$EMB' for x in diffs)"
# ... and a difference outside every dataset (/meta's config) is caught by
# those chunks (control for the note below: by datasets alone it is not)
cmp rechunkmeta 1 "$(ck h)" "$(ck m_onechunk)"
has rechunkmeta "chunk SHA-256s differ but every dataset's is equal"
has rechunkmeta "differs with the shards it describes"
# both hashes-only: the recorded hashes, nothing else exists
cmp bothsame 0 "$(ck h)" "$(ck h2)"
cmp bothother 1 "$(ck h)" "$(ck g_hashes)"
has bothother "both sides kept hashes only"
# both hashes-only with other chunk sizes: no bytes, no comparable chunks:
# dataset by dataset, equal, and the note says what was not compared; the
# shard is not counted byte-identical
cmp bothchunks 0 "$(ck h)" "$(ck h_onechunk)"
has bothchunks "every dataset's SHA-256 equal; the file's other bytes (/meta attributes, HDF5 layout) not compared (both sides kept hashes only, and the chunk sizes differ (A 65536, B 67108864 bytes))"
js bothchunks "d['files_identical'] == 0 and any(not x['failing'] and x['file'] == 'shard_00000_of_00001.h5' for x in d['diffs'])"
# control: equal chunk sizes say nothing of the kind
hasnt bothsame "not compared ("
# one dataset changed (its hash in B's manifest, COMPLETE rewritten): caught
cp -r "$(ck h_onechunk)" "$T/onedset"
python3 - "$T/onedset/manifest.json" "$EMB" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
old = [d["sha256"] for d in json.load(open(sys.argv[1]))["shards"][0]["datasets"] if d["path"] == sys.argv[2]][0]
new = ("0" if old[0] != "0" else "1") + old[1:]
open(sys.argv[1], "w").write(text.replace(old, new))
PY
(cd "$T/onedset" && sha256sum manifest.json >COMPLETE)
cmp onedset 1 "$T/onedset" "$(ck h)"
js onedset "[x['object'] for x in diffs if x['kind'] == 'sha256'] == ['$EMB']"
hasnt onedset "layout) not compared"
# the limit that note states: a /meta-only difference is not seen there
cmp bothmeta 0 "$(ck h)" "$(ck m_hashes_onechunk)"
has bothmeta "layout) not compared"
# --trust-manifests reads no bytes: by datasets, and says so
cmp trustchunks 0 "$(ck h)" "$(ck f_onechunk)" --trust-manifests
has trustchunks "--trust-manifests: no bytes read"

# a forged manifest on the full side: every dataset hash set to the
# hashes-only side's (COMPLETE rewritten to match), file and chunk hashes
# kept, so the shard still verifies
cp -r "$(ck g)" "$T/forged"
python3 - "$(ck h)/manifest.json" "$T/forged/manifest.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
f = json.load(open(sys.argv[2]))
want = {d["path"]: d["sha256"] for d in h["shards"][0]["datasets"]}
text = open(sys.argv[2]).read()
for d in f["shards"][0]["datasets"]:
    text = text.replace(d["sha256"], want[d["path"]])
open(sys.argv[2], "w").write(text)
PY
(cd "$T/forged" && sha256sum manifest.json >COMPLETE)
grep -qF "$(python3 -c 'import json,sys; print([d["sha256"] for d in json.load(open(sys.argv[1]))["shards"][0]["datasets"] if d["path"] == sys.argv[2]][0])' "$(ck h)/manifest.json" $EMB)" "$T/forged/manifest.json" ||
  fail "the forged manifest does not claim h's hash for $EMB"
cmp forged 1 "$(ck h)" "$T/forged"
js forged "any(x['kind'] == 'sha256' and x['object'] == '$EMB' for x in diffs)"
# control: taking the manifest's word (--trust-manifests) misses it
cmp trusted 1 "$(ck h)" "$T/forged" --trust-manifests
js trusted "not any(x['object'] == '$EMB' for x in diffs)"
has trusted "taken from its manifest (--trust-manifests)"

# a hashes-only directory that holds a shard is not what it says: 65
cp -r "$(ck h)" "$T/extra"
cp "$(ck f)/shard_00000_of_00001.h5" "$T/extra/"
cmp extra 65 "$T/extra" "$(ck f)"
has extra "present although its manifest says the checkpoint kept hashes only"

# inspect: a hashes-only directory says what it is; a full one is refused
# as a directory, as before
"$RC_BIN" inspect "$(ck h)" >"$T/inspect.out" 2>&1 || fail "inspect of a hashes-only directory"
has inspect "a hashes-only checkpoint"
has inspect "$EMB"
has inspect "whole-file sha256 not recorded (hashes only)"
hasnt inspect "sha256 ,"
"$RC_BIN" inspect "$(ck f)" >"$T/inspect_full.out" 2>&1 && fail "control: inspect of a full checkpoint directory is refused"
hasnt inspect_full "hashes-only"
"$RC_BIN" inspect "$(ck h)/shard_00000_of_00001.h5" >"$T/inspect_shard.out" 2>&1
[ $? = 66 ] || fail "inspect of a never-written shard: 66"
has inspect_shard "holds hashes only"

if [ "$fails" = 0 ]; then
  echo ok
  exit 0
fi
echo "$fails check(s) failed"
exit 1
