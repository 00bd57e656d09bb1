#!/usr/bin/env bash
# ckpt_load_checks.sh — a resumed leg checks its load's dataset hashes on a
# thread while it trains (core/checkpointing.h, rc_model_load_checked): the
# chunk hashes verify every byte before the load returns; the per-dataset
# hashes of the manifest are checked beside the first steps and joined
# before the leg's first save and after its last step. A manifest whose
# first dataset hash is wrong (chunk hashes right, COMPLETE re-signed, as a
# mis-writing tool would leave it) must still fail the leg with 65, naming
# the dataset, and nothing may be saved from it. Controls: the same forged
# checkpoint with RC_TEST_LOAD_CHECKS_DATASETS=1 (the load checks them
# itself, as before: 65 before any step) and the unforged one (resumes).
set -u
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_load_checks.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
F=(--preset tiny --steps 6)
RC_TEST_CHUNK_BYTES=65536 "$RC_BIN" train "${F[@]}" --stop-at 2 --save-at 2 --out "$T/s" >/dev/null 2>&1 ||
  fail "the saving leg failed"
cp -r "$T/s" "$T/f"
it="$T/f/ckpt/iter_0000002"
python3 - "$it" <<'PY' || fail "forging the manifest"
import hashlib, json, sys
d = sys.argv[1]
text = open(d + "/manifest.json").read()
m = json.loads(text)
h = m["shards"][0]["datasets"][0]["sha256"]
bad = ("1" if h[0] == "0" else "0") + h[1:]
text = text.replace(h, bad, 1)
open(d + "/manifest.json", "w").write(text)
open(d + "/COMPLETE", "w").write(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")
PY

# the forged checkpoint: the leg fails (65), names the dataset, saves nothing
"$RC_BIN" train "${F[@]}" --resume-from "$it" --save-at 4,6 --out "$T/r" >"$T/r.out" 2>&1
rc=$?
[ "$rc" = 65 ] || fail "forged, checked beside the steps: exit $rc, want 65"
grep -q "the manifest's entry for this dataset is wrong" "$T/r.out" || fail "forged: no dataset message"
grep -q "the checkpoint this leg loaded" "$T/r.out" || fail "forged: the message does not say which load"
[ -e "$T/r/ckpt/iter_0000004/COMPLETE" ] && fail "forged: a checkpoint was saved from it"
# control: checked by the load itself, before any step
RC_TEST_LOAD_CHECKS_DATASETS=1 "$RC_BIN" train "${F[@]}" --resume-from "$it" --save-at 4,6 \
  --out "$T/c" >"$T/c.out" 2>&1
rc=$?
[ "$rc" = 65 ] || fail "forged, checked by the load: exit $rc, want 65"
grep -q "the manifest's entry for this dataset is wrong" "$T/c.out" || fail "control: no dataset message"
[ -s "$T/c/trace.csv" ] && [ "$(wc -l <"$T/c/trace.csv")" -gt 1 ] && fail "control: it trained"
# control: the good checkpoint resumes, its check joined (a timing row)
"$RC_BIN" train "${F[@]}" --resume-from "$T/s/ckpt/iter_0000002" --save-at 4,6 --out "$T/g" \
  >"$T/g.out" 2>&1 || fail "the good checkpoint: exit $?"
grep -q '^load_check_wait,,' "$T/g/timing.csv" || fail "no load_check_wait row"
[ -f "$T/g/ckpt/iter_0000006/COMPLETE" ] || fail "the good checkpoint: nothing saved at 6"
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
