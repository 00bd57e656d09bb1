#!/usr/bin/env bash
# run_census.sh — the state census at the resume point (docs/census.md):
# `train` writes it after a save and after a load, `run` compares through
# with resumed, names every saved field that differs with both values,
# lists process-local ones as such, and fails a run whose state differs at
# the resume point even when no step to N shows it yet. Every case has its
# control: the same run without the fault passes.
. "$(dirname "$0")/run_lib.sh"
need_train

# json_check FILE CODE: python statements (asserts) on the document d.
json_check() {
  python3 - "$1" "$2" <<'PY' || fail "report check on $1"
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
}

# --- the built-in trainer: clean runs pass, the census is written and compared
run_rc clean --steps 6 --save-at 3 --out "$T/clean" --json "$T/clean.json"
expect_rc 0 "clean run" clean
for leg in through save resume@3; do
  [ -f "$T/clean/$leg/census/iter_0000003.rank0.txt" ] || fail "no census from $leg at step 3"
done
[ -e "$T/clean/through/census/iter_0000006.rank0.txt" ] && fail "a census at N (nothing resumes from N)"
contains "$T/clean.out" "CENSUS resume@3"
contains "$T/clean.out" "saved state identical"
for f in iteration data.consumed_samples optimizer.step scheduler.num_steps loss_scaler.scale \
  loss_scaler.growth_tracker loss_scaler.hysteresis_tracker rng.seed rng.offset \
  model.embedding/word_embeddings/weight main_grad.holds_gradients; do
  grep -q "^$f	" "$T/clean/through/census/iter_0000003.rank0.txt" || fail "census lacks $f"
done
# the only differences between the two processes are local ones (values: a
# note may say what each process's next step does with an equal value, as a
# copy field's does)
diff <(grep -v '^#' "$T/clean/through/census/iter_0000003.rank0.txt" | grep -v '	local	' | cut -f1-3) \
  <(grep -v '^#' "$T/clean/resume@3/census/iter_0000003.rank0.txt" | grep -v '	local	' | cut -f1-3) >/dev/null ||
  fail "a clean resume has saved fields that differ"
json_check "$T/clean.json" '
c = [c for c in d["checks"] if c["kind"] == "census"]
assert len(c) == 1 and c[0]["name"] == "CENSUS resume@3" and c[0]["status"] == "identical", c
assert c[0]["census"]["saved_differ"] == 0 and c[0]["census"]["fields"] > 50, c[0]["census"]
assert all(x["class"] == "local" for x in c[0]["census"]["differences"])
'

# --- a resume bug: the census names the field with both values, and who
# wrote it: a field the load lost is "not restored by the load"; moments
# the save down-cast are what "the save wrote" (the through leg's census of
# what its save wrote), not a load's fault
for spec in "loss-scaler-not-saved|loss_scaler.scale|--precision fp16 --loss-scale-window 3" \
  "rng-not-saved|rng.offset|--dropout 0.1" \
  "data-position-not-saved|data.consumed_samples|" \
  "optimizer-step-not-saved|optimizer.step|" \
  "scheduler-not-restored|scheduler.num_steps|" \
  "expert-bias-not-saved|moe.expert_bias.|" \
  "amax-history-not-saved|fp8.amax_history.|--precision fp8" \
  "moments-saved-in-bf16|optimizer.exp_avg|"; do
  IFS='|' read -r bug field extra <<<"$spec"
  # shellcheck disable=SC2086
  run_rc "$bug" --steps 6 --save-at 3 --out "$T/$bug" --json "$T/$bug.json" --inject "$bug" $extra
  expect_rc 1 "$bug" "$bug"
  contains "$T/$bug.out" "census: state census at step 3 (resume@3):"
  want="(saved: not restored by the load)"
  [ "$bug" = moments-saved-in-bf16 ] &&
    want="(saved: the save wrote fp=[0-9a-f]*, which differs from the saving process's fp=[0-9a-f]*; the resumed process has what was saved)"
  grep -q "^    $field[^ ]*: through [^,]*, resumed .*$want" "$T/$bug.out" ||
    fail "$bug: the census does not name $field as $want"
  json_check "$T/$bug.json" "
c = [c for c in d['checks'] if c['kind'] == 'census'][0]
assert c['status'] == 'differs', c['status']
s = [x for x in c['census']['differences'] if x['class'] == 'saved']
assert s and all(x['through'] != x['resumed'] for x in s), s
assert any(x['field'].startswith('$field') for x in s), [x['field'] for x in s]
assert d['census_finding'] and '$field' in d['census_finding'], d['census_finding']
"
  # control: the same config without the bug
  # shellcheck disable=SC2086
  run_rc "$bug-control" --steps 6 --save-at 3 --out "$T/$bug-control" $extra
  expect_rc 0 "$bug control" "$bug-control"
done

# --- the seed: saved state identical, the flags listed as process-local
run_rc seed --steps 6 --save-at 3 --precision bf16 --mtp-repeated-layer \
  --first-microbatch-policy legacy --out "$T/seed"
expect_rc 1 "seed" seed
grep -Eq "CENSUS resume@3 +identical" "$T/seed.out" || fail "seed: the census check is not identical"
contains "$T/seed.out" "census: state census at step 3 (resume@3): saved state identical"
grep -q "linear.is_first_microbatch ([0-9]* modules: through FALSE, resumed TRUE): process-local by design: policy legacy passes the flag" "$T/seed.out" ||
  fail "seed: the flags are not listed as process-local"
# persist checkpoints the flags: they are saved fields, and restored
run_rc persist --steps 6 --save-at 3 --precision bf16 --mtp-repeated-layer \
  --first-microbatch-policy persist --out "$T/persist"
expect_rc 0 "persist" persist
grep -q "^linear.is_first_microbatch.mtp/layers/0/eh_proj	saved	FALSE" \
  "$T/persist/resume@3/census/iter_0000003.rank0.txt" || fail "persist: the flag is not a restored saved field"

# --- latent: the growth tracker is lost but the scale never moves before N,
# so no step differs; the census still fails the run at the resume point
run_rc latent --steps 6 --save-at 3 --precision fp16 --inject loss-scaler-not-saved --out "$T/latent" \
  --json "$T/latent.json"
expect_rc 1 "latent" latent
grep -Eq "TRACE resume@3 +identical" "$T/latent.out" || fail "latent: a step differs"
contains "$T/latent.out" "RESUME diverged at the resume point"
contains "$T/latent.out" "loss_scaler.growth_tracker: through 3, resumed 0 (saved: not restored by the load)"
json_check "$T/latent.json" '
f = d["first_divergence"]
assert f["check"] == "CENSUS resume@3" and f["step"] is None, f
'
run_rc latent-control --steps 6 --save-at 3 --precision fp16 --out "$T/latent-control"
expect_rc 0 "latent control" latent-control

# --- the bugs the census exists for, caught by --save-at auto on an fp16
# config that really overflows: the census names the field, bisect too
OV="--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2"
for spec in "hysteresis-not-saved|loss_scaler.hysteresis_tracker: through 1, resumed 2 (saved: not restored by the load)|" \
  "adam-step-from-iteration|optimizer.step: through 2, resumed 3 (saved: not restored by the load)|" \
  "save-draws-rng|(saved; the save changed the process that saved: |--dropout 0.1"; do
  IFS='|' read -r bug words extra <<<"$spec"
  # shellcheck disable=SC2086
  run_rc "auto-$bug" --steps 10 --save-at auto $OV --inject "$bug" $extra --out "$T/auto-$bug"
  expect_rc 1 "auto $bug" "auto-$bug"
  grep -Eq "CENSUS resume@3 +DIFFERS" "$T/auto-$bug.out" || fail "auto $bug: CENSUS resume@3 does not differ"
  contains "$T/auto-$bug.out" "census: state census at step 3 (resume@3): 1 saved field differs; first: "
  contains "$T/auto-$bug.out" "$words"
  "$RC_BIN" bisect "$T/auto-$bug" --json "$T/auto-$bug.bisect.json" >"$T/auto-$bug.bisect" 2>&1
  [ $? = 1 ] || fail "bisect of auto $bug: exit $?, want 1"
  contains "$T/auto-$bug.bisect" "state census at step 3"
  contains "$T/auto-$bug.bisect" "$words"
  # shellcheck disable=SC2086
  run_rc "auto-$bug-control" --steps 10 --save-at auto $OV $extra --out "$T/auto-$bug-control"
  expect_rc 0 "auto $bug control" "auto-$bug-control"
done
json_check "$T/auto-hysteresis-not-saved.bisect.json" '
assert d["cause"]["kind"] == "previous-update" and d["cause"]["event"]["kind"] == "loss_scaler", d["cause"]
'
json_check "$T/auto-adam-step-from-iteration.bisect.json" 'assert d["cause"]["kind"] == "resume-state", d["cause"]'
json_check "$T/auto-save-draws-rng.bisect.json" 'assert d["cause"]["kind"] == "save-side-effect", d["cause"]'

# --- exec trainers: an optional census in the same format
run_rc exec-good --trainer exec --train-cmd "$(tmpl --census good)" --steps 6 --save-at 3 --out "$T/exec-good"
expect_rc 0 "exec census good" exec-good
contains "$T/exec-good.out" "saved state identical; 1 process-local field differs by design"
run_rc exec-counter --trainer exec --train-cmd "$(tmpl --census good --bug forget-counter)" --steps 6 \
  --save-at 3 --out "$T/exec-counter"
expect_rc 1 "exec census forget-counter" exec-counter
contains "$T/exec-counter.out" "counter: through 3, resumed 0 (saved: not restored by the load)"
run_rc exec-none --trainer exec --train-cmd "$(tmpl)" --steps 6 --save-at 3 --out "$T/exec-none"
expect_rc 0 "exec without census" exec-none
contains "$T/exec-none.out" "no census (the legs wrote none)"
run_rc exec-bad --trainer exec --train-cmd "$(tmpl --census malformed)" --steps 6 --save-at 3 \
  --out "$T/exec-bad"
expect_rc 65 "exec census malformed" exec-bad
contains "$T/exec-bad.out" "not a census line"

finish
