#!/usr/bin/env bash
# ckpt_resume.sh — resume exactness by hand (no harness): train-through to 10
# saving at 5 and 10; train to 5 and save; resume from 5 to 10. With
# `resolve` the shards at 5 and 10 and trace rows 6-10 are byte-identical;
# with the seed's bug (legacy + repeated MTP + bf16 + fusion on) step 10's
# shard differs while step 5's does not. A resumed leg does not draw the
# weights it is about to load (control: a fresh leg does).
set -u
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
shard=shard_00000_of_00001.h5
three_legs() { # dir flags...
  local d=$1; shift
  "$RC_BIN" train "$@" --steps 10 --save-at 5,10 --out "$d/through" 2>/dev/null &&
  "$RC_BIN" train "$@" --steps 10 --stop-at 5 --save-at 5 --out "$d/save" 2>/dev/null &&
  "$RC_BIN" train "$@" --steps 10 --resume-from "$d/save/ckpt/iter_0000005" --save-at 10 --out "$d/resume" 2>/dev/null
}
same() { cmp -s "$1" "$2"; }

F="--precision bf16 --mtp-depths 2 --mtp-repeated-layer --grad-accum-fusion on"
three_legs "$t/ok" $F --first-microbatch-policy resolve || { echo "FAIL: legs failed"; exit 1; }
same "$t/ok/through/ckpt/iter_0000005/$shard" "$t/ok/save/ckpt/iter_0000005/$shard" && echo "ok: resolve step-5 shards identical" || { echo "FAIL: step-5 shards differ"; fail=1; }
same "$t/ok/through/ckpt/iter_0000010/$shard" "$t/ok/resume/ckpt/iter_0000010/$shard" && echo "ok: resolve step-10 shards identical" || { echo "FAIL: step-10 shards differ"; fail=1; }
same "$t/ok/through/ckpt/iter_0000010/manifest.json" "$t/ok/resume/ckpt/iter_0000010/manifest.json" && echo "ok: manifests identical" || { echo "FAIL: manifests differ"; fail=1; }
if diff <(sed -n '7,11p' "$t/ok/through/trace.csv") <(sed -n '2,6p' "$t/ok/resume/trace.csv") >/dev/null; then echo "ok: trace rows 6-10 identical"; else echo "FAIL: trace rows differ"; fail=1; fi
[ "$(sed -n '2p' "$t/ok/resume/trace.csv" | cut -d, -f1)" = 6 ] || { echo "FAIL: resume trace does not start at step 6"; fail=1; }

# a resumed process does not draw weights (the load sets every one; the
# identical shards and trace above show the bits are those of drawing and
# loading); control: a fresh leg does draw them
RC_PROFILE=1 "$RC_BIN" train $F --first-microbatch-policy resolve --steps 10 \
  --resume-from "$t/ok/save/ckpt/iter_0000005" --out "$t/ok/resume_p" 2>"$t/resume_p.err" >/dev/null
grep -q "weight draws skipped" "$t/resume_p.err" && ! grep -q "weight draws on the backend" "$t/resume_p.err" &&
  echo "ok: a resumed leg skips the weight draws" || { echo "FAIL: a resumed leg drew weights"; fail=1; }
# the device's tensors go up while the load reads (rc_load_into.landed):
# the profile counts them, and the resumed leg is byte for byte the one
# that copies everything after the load (RC_TEST_NO_EARLY_UPLOAD=1, which
# counts none: the control)
grep -Eq "load: the rest of the copy \(([1-9][0-9]*) tensors went up as they landed\)" "$t/resume_p.err" &&
  echo "ok: tensors uploaded as they landed" || { echo "FAIL: no early upload counted"; fail=1; }
RC_TEST_NO_EARLY_UPLOAD=1 RC_PROFILE=1 "$RC_BIN" train $F --first-microbatch-policy resolve --steps 10 \
  --resume-from "$t/ok/save/ckpt/iter_0000005" --save-at 10 --out "$t/ok/resume_late" 2>"$t/late.err" >/dev/null
grep -q "(0 tensors went up as they landed)" "$t/late.err" && echo "ok: control: none early with the hook" ||
  { echo "FAIL: the hook did not turn early uploads off"; fail=1; }
same "$t/ok/resume/ckpt/iter_0000010/$shard" "$t/ok/resume_late/ckpt/iter_0000010/$shard" &&
  same "$t/ok/resume/trace.csv" "$t/ok/resume_late/trace.csv" && echo "ok: early and late uploads give the same leg" ||
  { echo "FAIL: early upload changed the resumed leg"; fail=1; }
RC_PROFILE=1 "$RC_BIN" train $F --steps 2 --out "$t/fresh_p" 2>"$t/fresh_p.err" >/dev/null
grep -q "weight draws on the backend" "$t/fresh_p.err" && echo "ok: control: a fresh leg draws them" ||
  { echo "FAIL: a fresh leg did not draw weights"; fail=1; }

three_legs "$t/bug" $F --first-microbatch-policy legacy || { echo "FAIL: legs failed"; exit 1; }
same "$t/bug/through/ckpt/iter_0000005/$shard" "$t/bug/save/ckpt/iter_0000005/$shard" && echo "ok: legacy A/A at 5 identical" || { echo "FAIL: legacy A/A differs"; fail=1; }
same "$t/bug/through/ckpt/iter_0000010/$shard" "$t/bug/resume/ckpt/iter_0000010/$shard" && { echo "FAIL: the seed's bug went unseen at step 10"; fail=1; } || echo "ok: legacy step-10 shards differ (the seed's bug)"
# loss equal, grad norm different at step 6 (columns 2 = loss, grad_norm by name)
col() { awk -F, -v name="$2" 'NR==1{for(i=1;i<=NF;i++) if($i==name) c=i} NR>1 && $1==6 {print $c}' "$1"; }
[ "$(col "$t/bug/through/trace.csv" loss_hex)" = "$(col "$t/bug/resume/trace.csv" loss_hex)" ] && echo "ok: loss equal at step 6" || { echo "FAIL: loss differs at 6"; fail=1; }
[ "$(col "$t/bug/through/trace.csv" grad_norm_hex)" != "$(col "$t/bug/resume/trace.csv" grad_norm_hex)" ] && echo "ok: grad norm differs at step 6" || { echo "FAIL: grad norm equal at 6"; fail=1; }

# save -> load -> save: a resumed process that saves at once reproduces the shard
# (of a fresh process that trains to 6; the check once compared a file with itself)
"$RC_BIN" train $F --first-microbatch-policy resolve --steps 10 --resume-from "$t/ok/save/ckpt/iter_0000005" --stop-at 6 --save-at 6 --out "$t/again" 2>/dev/null
"$RC_BIN" train $F --first-microbatch-policy resolve --steps 10 --stop-at 6 --save-at 6 --out "$t/six" 2>/dev/null
same "$t/six/ckpt/iter_0000006/$shard" "$t/again/ckpt/iter_0000006/$shard" && echo "ok: resumed-and-saved shard at 6 identical to a fresh one" ||
  { echo "FAIL: the shard saved at 6 after a resume differs from a fresh leg's"; fail=1; }
same "$t/six/ckpt/iter_0000006/$shard" "$t/ok/through/ckpt/iter_0000005/$shard" && { echo "FAIL: control: step 6 and step 5 shards are equal"; fail=1; }
h5dump -H "$t/ok/through/ckpt/iter_0000005/$shard" >/dev/null 2>&1 && { h5dump -H "$t/ok/through/ckpt/iter_0000005/$shard" | grep -q 'DATASET "weight"' && echo "ok: h5dump reads the shard"; } || echo "note: h5dump not available"
exit $fail
