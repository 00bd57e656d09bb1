#!/usr/bin/env bash
# compare_hashes_only.sh — `compare` of a hashes-only checkpoint (`train
# --save-hashes-at`: manifest, no shard) against a full one: equal state is
# identical by SHA-256 (chunk lists, or whole files when the chunk sizes
# differ); other state names each differing dataset as a sha256
# difference, "values not compared"; the full side's dataset hashes come
# from its bytes, so a manifest forged to claim equal datasets is caught
# (control: --trust-manifests takes the manifest's word and misses it).
# Also: both sides hashes-only, a hashes-only directory holding a shard
# (65), and `inspect` of one. Each case has its control.
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
[ -e "$(ck h)/shard_00000_of_00001.h5" ] && fail "the hashes-only save wrote a shard"

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
# chunk sizes differ: the full side's whole-file SHA-256 from its bytes
cmp wholesame 0 "$(ck h)" "$(ck f_onechunk)"
cmp wholeother 1 "$(ck h)" "$(ck g_onechunk)"
js wholeother "any(x['kind'] == 'sha256' and x['object'] == '$EMB' for x in diffs)"
# both hashes-only: the recorded hashes, nothing else exists
cmp bothsame 0 "$(ck h)" "$(ck h2)"
cmp bothother 1 "$(ck h)" "$(ck g_hashes)"
has bothother "both sides kept hashes only"

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
