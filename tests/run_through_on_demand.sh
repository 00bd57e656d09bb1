#!/usr/bin/env bash
# run_through_on_demand.sh — `run --through-checkpoints on-demand` on the
# real CPU core (harness/run_deferred.c, `train --save-deferred-at`): the
# through leg keeps hashes at K, stages and hashes its state at N, and
# writes the shard only when `run` finds a check at N that differs. Asserted:
#   - train: --save-deferred-at must name saved steps, not hashes-only ones
#     (64); without a decision pipe it is a plain full save (same bytes);
#     `run` refuses it as a leg flag;
#   - the seed (legacy): exit 1, through@N written in full, RESUME@N names
#     values, the same first divergence as --through-checkpoints hashes
#     (which always writes N: the control);
#   - resolve: exit 0, through@N hashes only, RESUME@N identical by SHA-256,
#     the why names the check; with --aa (A/A@N too) and --save-at every
#     (several legs end at N: the word waits for all of them);
#   - --jobs 1: the resume leg could never start while through waits, so
#     `run` says "full" at once and the run ends (no hang);
#   - a resume leg that dies does not hold the word up (--keep-going);
#   - refused with --confirm-arm and with an exec trainer (64).
source "$(dirname "$0")/run_lib.sh"
need_train

deferred() { # DIR KEPT WHAT: legs[through].deferred_save.kept
  json_true "$1/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['kept'] == '$2'" "$3"
}

# --- train
"$RC_BIN" train --steps 4 --save-at 3 --save-deferred-at 4 --out "$T/t" >"$T/t.out" 2>&1
[ $? = 64 ] || fail "--save-deferred-at 4 with --save-at 3: want 64"
contains "$T/t.out" "--save-deferred-at 4 is not in --save-at"
"$RC_BIN" train --steps 4 --save-at 3 --save-hashes-at 3 --save-deferred-at 3 --out "$T/t2" >"$T/t2.out" 2>&1
[ $? = 64 ] || fail "--save-deferred-at and --save-hashes-at on one step: want 64"
"$RC_BIN" train --steps 4 --save-at 3 --save-deferred-at 3 --dry-run >/dev/null 2>&1 ||
  fail "control: --save-deferred-at 3 with --save-at 3 is accepted"
"$RC_BIN" train --steps 3 --save-at 3 --save-deferred-at 3 --out "$T/d" >/dev/null 2>&1 ||
  fail "train --save-deferred-at without a pipe"
"$RC_BIN" train --steps 3 --save-at 3 --out "$T/p" >/dev/null 2>&1 || fail "train, plain save"
for f in shard_00000_of_00001.h5 manifest.json COMPLETE; do
  cmp -s "$T/d/ckpt/iter_0000003/$f" "$T/p/ckpt/iter_0000003/$f" || fail "no pipe: $f is not the plain save's"
done
[ -e "$T/d/ckpt/iter_0000003.deferred.json" ] && fail "no pipe: a deferred note left"
"$RC_BIN" run --steps 4 --save-at 2 --save-deferred-at 4 --out "$T/u" >/dev/null 2>&1
[ $? = 64 ] || fail "run refuses --save-deferred-at (a leg flag)"

SEED=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --steps 6 --save-at 3
  --progress off)
RES="[c for c in d['checks'] if c['name'] == 'RESUME@3→6'][0]"
# --- the seed: through@6 written in full, values named
run_rc od_l "${SEED[@]}" --first-microbatch-policy legacy --out "$T/l" --jobs 3 --through-checkpoints on-demand
expect_rc 1 "seed, on-demand" od_l
[ -f "$T/l/through/ckpt/iter_0000006/shard_00000_of_00001.h5" ] || fail "seed: no shard in through@6"
[ -e "$T/l/through/ckpt/iter_0000003/shard_00000_of_00001.h5" ] && fail "seed: a shard in through@3"
deferred "$T/l" full "seed: through@6 kept in full"
json_true "$T/l/report.json" "'RESUME@3→6 differs' in [l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['why']" "seed: why names RESUME@3→6"
json_true "$T/l/report.json" "d['config']['through_checkpoints'] == 'on-demand' and any(x['kind'] == 'values' for x in $RES['state']['diffs'])" "seed: RESUME@6 compares values"
contains "$T/od_l.out" "at 6 written in full: RESUME@3→6 differs"
contains "$T/l/through/log.txt" "step 6: writing the shard in full"
run_rc h_l "${SEED[@]}" --first-microbatch-policy legacy --out "$T/hl" --jobs 3 --through-checkpoints hashes
expect_rc 1 "seed, hashes (control)" h_l
json_true "$T/l/report.json" "(lambda e: d['first_divergence']['step'] == e['first_divergence']['step'] == 4 and d['first_divergence']['columns'] == e['first_divergence']['columns'])(json.load(open('$T/hl/report.json')))" "on-demand: the same first divergence as hashes"
json_true "$T/hl/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save'] is None" "control: hashes defers nothing"

# --- resolve: hashes only at 6
run_rc od_r "${SEED[@]}" --first-microbatch-policy resolve --out "$T/r" --jobs 3 --through-checkpoints on-demand
expect_rc 0 "resolve, on-demand" od_r
[ -e "$T/r/through/ckpt/iter_0000006/shard_00000_of_00001.h5" ] && fail "resolve: a shard in through@6"
json_true "$T/r/through/ckpt/iter_0000006/manifest.json" "d['hashes_only'] is True" "resolve: through@6 hashes only"
deferred "$T/r" hashes "resolve: through@6 kept as hashes"
contains "$T/od_r.out" "through@6 (hashes only) vs resume@3→6: 1/1 shards SHA-256-identical"
contains "$T/od_r.out" "at 6 kept as hashes: RESUME@3→6 byte-identical by chunk hashes"
grep -q '^deferred_wait,6,' "$T/r/through/timing.csv" || fail "resolve: no deferred_wait row"
[ -z "$(find "$T/r" -name '*.deferred.json')" ] || fail "resolve: a deferred note left"

# --- --aa: A/A@6 against aa's full shard too
run_rc od_aa "${SEED[@]}" --first-microbatch-policy resolve --aa --out "$T/a" --jobs 4 \
  --through-checkpoints on-demand
expect_rc 0 "resolve, --aa, on-demand" od_aa
deferred "$T/a" hashes "--aa: through@6 kept as hashes"
json_true "$T/a/report.json" "(lambda w: 'A/A@6' in w and 'RESUME@3→6' in w)([l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['why'])" "--aa: why names both checks at 6"

# --- every: three legs end at 4; the word waits for all of them
run_rc od_e --preset tiny --precision bf16 --mtp-repeated-layer --first-microbatch-policy resolve \
  --steps 4 --save-at every --jobs 5 --progress off --out "$T/e" --through-checkpoints on-demand
expect_rc 0 "every, on-demand" od_e
deferred "$T/e" hashes "every: kept as hashes"
json_true "$T/e/report.json" "all(k in [l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['why'] for k in ('RESUME@1→4', 'RESUME@2→4', 'RESUME@3→4'))" "every: why names the three checks at 4"

# --- --jobs 1: no slot for resume@3 while through waits: full at once
timeout 120 "$RC_BIN" run "${SEED[@]}" --first-microbatch-policy resolve --out "$T/j" --jobs 1 \
  --through-checkpoints on-demand >"$T/j.out" 2>&1
[ $? = 0 ] || fail "--jobs 1, on-demand: want 0 (and no hang)"
deferred "$T/j" full "--jobs 1: full"
json_true "$T/j/report.json" "'no job slot' in [l for l in d['legs'] if l['label'] == 'through'][0]['deferred_save']['why']" "--jobs 1: why says no slot"

# --- a resume leg that dies does not hold the word up
RC_TEST_KILL_BEFORE_SAVE=resume@3 run_rc od_k "${SEED[@]}" --first-microbatch-policy resolve \
  --out "$T/k" --jobs 3 --through-checkpoints on-demand --keep-going
expect_rc 70 "resume leg killed, on-demand" od_k
json_true "$T/k/report.json" "[l for l in d['legs'] if l['label'] == 'through'][0]['status'] == 'ok'" "killed resume: through still ends ok"

# --- refusals
run_rc od_arm "${SEED[@]}" --first-microbatch-policy legacy --confirm-arm --out "$T/arm" \
  --through-checkpoints on-demand
expect_rc 64 "on-demand with --confirm-arm" od_arm
contains "$T/od_arm.err" "ARMS@N compares the two arms' through states value by value"
run_rc od_x --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/x" \
  --through-checkpoints on-demand
expect_rc 64 "on-demand with an exec trainer" od_x
contains "$T/od_x.err" "--through-checkpoints on-demand needs the built-in trainer"
finish
