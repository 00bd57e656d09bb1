#!/usr/bin/env bash
# run_handoff.sh — a checkpoint handed to the pre-warmed resume leg before it
# is durable (io/handoff.c, `train --handoff`). The save holds 1.5 s between
# its note and its fsync (RC_TEST_HANDOFF=delay:MS), so on any disk the
# waiting leg loads from the note. Asserted:
#   - `train --handoff` alone: the note appears beside the iteration
#     directory while the save is held (the shard's temporary file, chunk and
#     dataset hashes, no whole-file hash), is gone afterwards, and the
#     checkpoint's files are byte-identical to a save without it;
#   - the seed as always: legacy diverges at K+1 in grad_norm with the loss
#     equal, resolve is identical, with the resume leg loaded before the
#     checkpoint was durable (report.json legs[].timing.loaded_before_durable),
#     and its trace and checkpoint byte-identical to a --no-handoff run's
#     (the negative control: there it loaded after COMPLETE);
#   - what must fail does: the producer killed after the note ends the
#     resumed leg (66, "will not come"; run 70); a note whose hash is wrong
#     fails the load (65); a manifest that lists other hashes than the note
#     fails the confirmation (65).
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer)
early() { # DIR LEG: loaded before durable, confirmed
  json_true "$1/report.json" "[l for l in d['legs'] if l['label'] == '$2'][0]['timing']['loaded_before_durable'] is True" "$2 in $1 loaded before durable"
  contains "$1/$2/log.txt" "before it was durable (handed over)"
  grep -q '^handoff_confirm_wait,,' "$1/$2/timing.csv" || fail "$2 in $1: no handoff_confirm_wait row"
}
no_notes() { # DIR: no note left anywhere
  local left
  left=$(find "$1" -name '*.handoff.json*' | head -3)
  [ -z "$left" ] || fail "notes left behind: $left"
}

# --- train --handoff on its own: the note while held, nothing after
RC_TEST_HANDOFF=delay:2000 "$RC_BIN" train "${F[@]}" --steps 3 --save-at 2 --handoff \
  --out "$T/tr" >"$T/tr.log" 2>&1 &
pid=$!
note="$T/tr/ckpt/iter_0000002.handoff.json"
i=0
while [ ! -f "$note" ] && [ $i -lt 300 ]; do
  sleep 0.05
  i=$((i + 1))
done
if [ -f "$note" ]; then
  have_py && python3 - "$note" "$T/tr/ckpt/iter_0000002" <<'PY' || fail "the note's contents"
import json, os, sys
d = json.load(open(sys.argv[1]))
f = d["fragment"]
assert d["format"] == "resumecheck-handoff" and d["version"] == 1, d
assert d["temp_file"].startswith("shard_00000_of_00001.h5.tmp."), d["temp_file"]
assert os.path.exists(os.path.join(sys.argv[2], d["temp_file"])), "temp file missing"
assert not os.path.exists(os.path.join(sys.argv[2], "COMPLETE")), "COMPLETE before the fsync"
assert f["hashes_only"] is True and f["iteration"] == 2 and f["world_size"] == 1
s = f["shard"]
assert "sha256" not in s and len(s["chunk_sha256"]) >= 1 and len(s["datasets"]) > 10, s.keys()
PY
else
  fail "no note within 15 s of train --handoff"
fi
wait $pid || fail "train --handoff exited $?"
[ -f "$T/tr/ckpt/iter_0000002/COMPLETE" ] || fail "train --handoff: no COMPLETE"
no_notes "$T/tr"
"$RC_BIN" train "${F[@]}" --steps 3 --save-at 2 --out "$T/tr0" >"$T/tr0.log" 2>&1 ||
  fail "train without --handoff"
for f in shard_00000_of_00001.h5 manifest.json COMPLETE; do
  cmp -s "$T/tr/ckpt/iter_0000002/$f" "$T/tr0/ckpt/iter_0000002/$f" || fail "$f differs with --handoff"
done
a=$(cd "$T/tr/ckpt/iter_0000002" && ls | LC_ALL=C sort | tr '\n' ' ')
b=$(cd "$T/tr0/ckpt/iter_0000002" && ls | LC_ALL=C sort | tr '\n' ' ')
[ "$a" = "$b" ] || fail "the checkpoint's files differ with --handoff: '$a' vs '$b'"

# --- the seed through a handoff, and the same runs without one
export RC_TEST_HANDOFF=delay:1500
run_rc legacy "${F[@]}" --first-microbatch-policy legacy --steps 10 --save-at 5 --out "$T/l" \
  --jobs 3 --progress off
expect_rc 1 "legacy, handed over" legacy
early "$T/l" resume@5
contains "$T/legacy.out" "RESUME diverged at step 6: grad_norm"
contains "$T/legacy.out" "; loss equal"
json_true "$T/l/report.json" "d['config']['handoff'] is True and d['first_divergence']['step'] == 6" "handoff on, diverges at 6"
for leg in through save; do
  json_true "$T/l/report.json" "[l for l in d['legs'] if l['label'] == '$leg'][0]['timing']['loaded_before_durable'] is False" "$leg loaded nothing early"
done
no_notes "$T/l"

run_rc legacy_off "${F[@]}" --first-microbatch-policy legacy --steps 10 --save-at 5 \
  --out "$T/lo" --jobs 3 --progress off --no-handoff
expect_rc 1 "legacy, --no-handoff" legacy_off
json_true "$T/lo/report.json" "d['config']['handoff'] is False and [l for l in d['legs'] if l['label'] == 'resume@5'][0]['timing']['loaded_before_durable'] is False" "--no-handoff: loaded after COMPLETE"
lacks "$T/lo/resume@5/log.txt" "before it was durable"
cmp -s "$T/l/resume@5/trace.csv" "$T/lo/resume@5/trace.csv" || fail "trace differs with the handoff"
for f in shard_00000_of_00001.h5 manifest.json; do
  cmp -s "$T/l/resume@5/ckpt/iter_0000010/$f" "$T/lo/resume@5/ckpt/iter_0000010/$f" ||
    fail "resume@5's $f differs with the handoff"
done

run_rc resolve "${F[@]}" --first-microbatch-policy resolve --steps 10 --save-at 5 --out "$T/r" \
  --jobs 3 --progress off
expect_rc 0 "resolve, handed over" resolve
early "$T/r" resume@5

# a chain: resume@3 hands its checkpoint at 6 to resume@6
run_rc chain "${F[@]}" --first-microbatch-policy resolve --steps 8 --save-at 3,6 --out "$T/c" \
  --jobs 4 --progress off
expect_rc 0 "chain 3,6, handed over" chain
early "$T/c" resume@3
early "$T/c" resume@6
no_notes "$T/c"

# --- what must fail
RC_TEST_HANDOFF=kill,delay:300 run_rc killed "${F[@]}" --steps 10 --save-at 5 --out "$T/k" \
  --jobs 3 --progress off --keep-going
expect_rc 70 "producer killed after handing over" killed
contains "$T/k/resume@5/log.txt" "before it was durable (handed over)"
contains "$T/k/resume@5/log.txt" "will not come"
json_true "$T/k/report.json" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['status'] == 'killed'" "resume@5 stopped"
json_true "$T/k/report.json" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['wall_s'] < 20" "resume@5 ended promptly"

RC_TEST_HANDOFF=bad-note,delay:800 run_rc badnote "${F[@]}" --steps 10 --save-at 5 \
  --out "$T/b" --jobs 3 --progress off --keep-going
expect_rc 70 "a note with a wrong hash" badnote
json_true "$T/b/report.json" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['exit_code'] == 65" "resume@5 exits 65"
# the load verifies every byte by the chunks; the note's wrong dataset
# hash is then refused by the load's dataset check beside the first steps
# (or, once COMPLETE is written, by the confirmation against the manifest)
grep -Eq "the handoff note says|completed with other bytes than it handed over" "$T/b/resume@5/log.txt" ||
  fail "a note with a wrong hash: neither the dataset check nor the confirmation refused it"

RC_TEST_HANDOFF=manifest-differs,delay:800 run_rc mdiff "${F[@]}" --steps 10 --save-at 5 \
  --out "$T/m" --jobs 3 --progress off --keep-going
expect_rc 70 "a manifest other than the note" mdiff
json_true "$T/m/report.json" "[l for l in d['legs'] if l['label'] == 'resume@5'][0]['exit_code'] == 65" "resume@5 exits 65"
contains "$T/m/resume@5/log.txt" "completed with other bytes than it handed over"
finish
