#!/usr/bin/env bash
# run_through_hashes.sh — `run --through-checkpoints hashes` on the real
# CPU core: the through leg's save at K keeps hashes only (no shard file,
# no whole-file hash),
# and every verdict is what the full run gives: clean (0, A/A identical by
# SHA-256), the seed (1, same first divergent step), non-determinism (2,
# the A/A@K difference named per dataset as "values not compared"). Each
# has its control: the same run with --through-checkpoints full. Also
# `train --save-hashes-at` outside --save-at (64) and a resume from a
# hashes-only checkpoint (65). hashes-all: no through shard at all, the
# seed found by SHA-256 at N; refused with --confirm-arm and exec (64).
source "$(dirname "$0")/run_lib.sh"
need_train

# train: --save-hashes-at must name saved steps
"$RC_BIN" train --steps 4 --save-at 3 --save-hashes-at 4 --out "$T/t" >"$T/t.out" 2>&1
[ $? = 64 ] || fail "--save-hashes-at 4 with --save-at 3: want 64"
contains "$T/t.out" "--save-hashes-at 4 is not in --save-at"
"$RC_BIN" train --steps 4 --save-at 3 --save-hashes-at 3 --dry-run >/dev/null 2>&1 ||
  fail "control: --save-hashes-at 3 with --save-at 3 is accepted"
"$RC_BIN" train --help | grep -q -- "--save-hashes-at" || fail "train --help lacks --save-hashes-at"
"$RC_BIN" run --steps 4 --save-at 2 --save-hashes-at 2 --out "$T/u" >/dev/null 2>&1
[ $? = 64 ] || fail "run refuses --save-hashes-at (a leg flag)"
run_rc badmode --steps 4 --save-at 2 --through-checkpoints some --out "$T/b" --progress off
expect_rc 64 "--through-checkpoints some" badmode

# clean: identical, A/A by SHA-256, no shard at K in through
run_rc clean --steps 6 --save-at 3 --out "$T/c" --through-checkpoints hashes --progress off
expect_rc 0 "clean, hashes" clean
contains "$T/clean.out" "through@3 (hashes only) vs save@3: 1/1 shards SHA-256-identical"
[ -e "$T/c/through/ckpt/iter_0000003/shard_00000_of_00001.h5" ] && fail "a shard in through@3"
[ -f "$T/c/through/ckpt/iter_0000003/COMPLETE" ] || fail "no COMPLETE in through@3"
[ -f "$T/c/through/ckpt/iter_0000006/shard_00000_of_00001.h5" ] || fail "no shard in through@6"
# through@3 records no whole-file sha256 (it computed none); the full
# through@6 does (control)
json_true "$T/c/through/ckpt/iter_0000003/manifest.json" "'sha256' not in d['shards'][0] and d['shards'][0]['chunk_sha256']" "through@3: no whole-file sha256, chunk hashes"
json_true "$T/c/through/ckpt/iter_0000006/manifest.json" "len(d['shards'][0]['sha256']) == 64" "control: through@6 records its whole-file sha256"
json_true "$T/c/report.json" "d['config']['through_checkpoints'] == 'hashes'" "config records hashes"
json_true "$T/c/report.json" "[c['state']['hashes_only'] for c in d['checks'] if c['name'] == 'A/A@3'] == [['a']]" "A/A@3: side a kept hashes only"
# control: full keeps the shard and says byte-identical; auto on the CPU is full
run_rc cleanf --steps 6 --save-at 3 --out "$T/cf" --through-checkpoints full --progress off
expect_rc 0 "clean, full" cleanf
contains "$T/cleanf.out" "through@3 vs save@3: 1/1 shards byte-identical"
[ -f "$T/cf/through/ckpt/iter_0000003/shard_00000_of_00001.h5" ] || fail "control: no shard in full through@3"
run_rc cleana --steps 6 --save-at 3 --out "$T/ca" --progress off
json_true "$T/ca/report.json" "d['config']['through_checkpoints'] == 'full'" "auto on the CPU is full"
# a hashes-only checkpoint cannot be resumed from
"$RC_BIN" train --steps 6 --resume-from "$T/c/through/ckpt/iter_0000003" --out "$T/r" >"$T/r.out" 2>&1
[ $? = 65 ] || fail "resume from a hashes-only checkpoint: want 65"
contains "$T/r.out" "holds hashes only"
# a chain: every K < N keeps hashes only
run_rc chain --steps 6 --save-at 2,4 --out "$T/ch" --through-checkpoints hashes --progress off
expect_rc 0 "chain, hashes" chain
for k in 2 4; do
  [ -e "$T/ch/through/ckpt/iter_000000$k/shard_00000_of_00001.h5" ] && fail "chain: a shard in through@$k"
done
contains "$T/chain.out" "through@4 (hashes only) vs resume@2→4"

# the seed: exit 1, the same first divergent step as full
SEED=(--precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy --steps 6 --save-at 3)
run_rc seedh "${SEED[@]}" --out "$T/sh" --through-checkpoints hashes --progress off
expect_rc 1 "seed, hashes" seedh
run_rc seedf "${SEED[@]}" --out "$T/sf" --through-checkpoints full --progress off
expect_rc 1 "seed, full" seedf
if have_py; then
  sh_step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_divergence"]["step"])' "$T/sh/report.json")
  sf_step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_divergence"]["step"])' "$T/sf/report.json")
  [ "$sh_step" = "$sf_step" ] || fail "seed: first divergent step $sh_step with hashes, $sf_step with full"
fi
# bisect of either run names the same operation: its replays save as the
# legs did, with shards (a replay's --save-hashes-at is not kept)
for m in sh sf; do
  "$RC_BIN" bisect "$T/$m" >"$T/$m.bisect" 2>&1
  [ $? = 1 ] || fail "bisect of the seed run ($m): exit $?, want 1"
  grep "^located:" "$T/$m.bisect" | sed 's/ (.*//' >"$T/$m.located"
done
grep -q "mtp/layers/0" "$T/sf.located" || fail "bisect (full) does not locate the shared MTP layer"
cmp -s "$T/sh.located" "$T/sf.located" || fail "bisect with hashes locates $(cat "$T/sh.located"), with full $(cat "$T/sf.located")"

# non-determinism: exit 2, A/A@4 differs per dataset by SHA-256 only. The
# reduction's order varies run to run and reaches the state only when the
# clipped update's bits change (clipping always on); a run whose state at 4
# happened to agree is tried again (at most 6 times).
ND=(--inject nondeterministic-reduction --clip-grad 0.01 --steps 8 --save-at 4)
AA="[c for c in d['checks'] if c['name'] == 'A/A@4'][0]"
nd_run() { # NAME MODE: until a run is exit 2 with A/A@4's state differing
  local i seen=""
  for i in 1 2 3 4 5 6 7 8; do
    rm -rf "$T/$1"
    run_rc "$1" "${ND[@]}" --out "$T/$1" --through-checkpoints "$2" --progress off
    seen="$seen $rc"
    # the order varies run to run: a pair of legs may happen to sum alike
    [ "$rc" = 2 ] || continue
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if '"$AA"'["status"] == "differs" else 1)' \
      "$T/$1/report.json" && return 0
  done
  fail "nondeterministic, $2: no run of 8 was exit 2 with A/A@4's state differing (exits:$seen)"
}
if have_py; then
  nd_run nh hashes
  json_true "$T/nh/report.json" "any(x['kind'] == 'sha256' and x['object'].startswith('/') and 'values not compared' in x['detail'] for x in $AA['state']['diffs'])" "A/A@4: datasets named, by SHA-256, values not compared"
  json_true "$T/nh/report.json" "not any(x['kind'] == 'values' for x in $AA['state']['diffs'])" "A/A@4: no value difference claimed"
  # control: with full shards the same kind of difference has values
  nd_run nf full
  json_true "$T/nf/report.json" "any(x['kind'] == 'values' for x in $AA['state']['diffs'])" "control: full A/A@4 compares values"
fi

# hashes-all: the through leg writes no shard, not even at N; the seed is
# still found at the same step with RESUME@N decided by SHA-256 (datasets
# named, no values); resolve is identical. Control: hashes keeps through@N
# full (above) and its RESUME@N compares values.
SEED=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --steps 6 --save-at 3 --progress off)
run_rc ha_l "${SEED[@]}" --first-microbatch-policy legacy --out "$T/hal" --through-checkpoints hashes-all
expect_rc 1 "seed, hashes-all" ha_l
run_rc h_l "${SEED[@]}" --first-microbatch-policy legacy --out "$T/hl" --through-checkpoints hashes
expect_rc 1 "seed, hashes" h_l
for it in 3 6; do
  [ -e "$T/hal/through/ckpt/iter_000000$it/shard_00000_of_00001.h5" ] && fail "hashes-all: a shard in through@$it"
  [ -f "$T/hal/through/ckpt/iter_000000$it/COMPLETE" ] || fail "hashes-all: no COMPLETE in through@$it"
done
[ -f "$T/hl/through/ckpt/iter_0000006/shard_00000_of_00001.h5" ] || fail "control: hashes keeps through@6's shard"
RES="[c for c in d['checks'] if c['name'] == 'RESUME@3→6'][0]"
json_true "$T/hal/report.json" "d['config']['through_checkpoints'] == 'hashes-all' and $RES['status'] == 'differs' and $RES['state']['hashes_only'] == ['a'] and not any(x['kind'] == 'values' for x in $RES['state']['diffs']) and any(x['kind'] == 'sha256' and x['object'].startswith('/model') for x in $RES['state']['diffs'])" "hashes-all: RESUME@6 by SHA-256, model datasets named, no values"
json_true "$T/hl/report.json" "any(x['kind'] == 'values' for x in $RES['state']['diffs'])" "control: with hashes, RESUME@6 compares values"
json_true "$T/hal/report.json" "(lambda e: d['first_divergence']['step'] == e['first_divergence']['step'] == 4 and d['first_divergence']['columns'] == e['first_divergence']['columns'])(json.load(open('$T/hl/report.json')))" "hashes-all: the same first divergence as hashes"
run_rc ha_r "${SEED[@]}" --first-microbatch-policy resolve --out "$T/har" --through-checkpoints hashes-all
expect_rc 0 "resolve, hashes-all" ha_r
contains "$T/ha_r.out" "through@6 (hashes only) vs resume@3→6: 1/1 shards SHA-256-identical"
run_rc ha_arm "${SEED[@]}" --first-microbatch-policy legacy --confirm-arm --out "$T/haa" --through-checkpoints hashes-all
expect_rc 64 "hashes-all with --confirm-arm" ha_arm
contains "$T/ha_arm.err" "ARMS@N compares the two arms' through states value by value"
run_rc ha_x --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/hax" --through-checkpoints hashes-all
expect_rc 64 "hashes-all with an exec trainer" ha_x
contains "$T/ha_x.err" "--through-checkpoints hashes-all needs the built-in trainer"
finish
