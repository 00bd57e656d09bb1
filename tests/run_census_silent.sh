#!/usr/bin/env bash
# run_census_silent.sh — RESUME diverged while every census compared saw no
# saved field differ: the report says so plainly, with what the census
# covered (the field families of the files it read, nothing more) and what
# no census sees (docs/census.md). Hand-made files through the fixture
# trainer: the censuses agree, the trace parts at step 5 and the state at 6
# differs. Controls: the same run whose census differs in a saved field
# says no such thing; a run without any census says no such thing either.
source "$(dirname "$0")/fixture_lib.sh"

# fixture DIR COUNTER FIRST: the resumed leg diverges at step 5; its
# after-load census has counter=COUNTER (3 agrees with through); FIRST=1
# writes equal first-step censuses too, none writes no census at all
fixture() {
  local f=$1 counter=$2 first=$3 role
  ckpts "$f/fresh/ckpt 3 /model/w=1,2 /optimizer/exp_avg/w=0.5,0.5" \
    "$f/fresh/ckpt 6 /model/w=3,4 /optimizer/exp_avg/w=0.25,0.25" \
    "$f/resumed/ckpt 6 /model/w=3,5 /optimizer/exp_avg/w=0.25,0.25"
  trace "$f/fresh/trace.csv" 1,5,0.5 2,4,0.4 3,3,0.3 4,2,0.2 5,1,0.1 6,0.5,0.05
  trace "$f/resumed/trace.csv" 4,2,0.2 5,1.5,0.1 6,0.75,0.05
  [ "$first" = none ] && return
  for role in fresh resumed; do
    local c=3
    [ "$role" = resumed ] && c=$counter
    local fields=("iteration|saved|3" "data.consumed_samples|saved|12"
      "rng.torch_cpu|saved|fp=1111111111111111" "optimizer.exp_avg.w|saved|fp=2222222222222222"
      "model.w|saved|fp=3333333333333333" "state.ema.shadow.w|saved|fp=4444444444444444"
      "counter|saved|$c" "pid|local|$role|the process id")
    census "$f/$role/census/iter_0000003.rank0.txt" "${fields[@]}"
    [ "$first" = 1 ] && census "$f/$role/census/iter_0000003.rank0.first-step.txt" "${fields[@]}"
  done
  return 0
}
words="census: the census saw no difference at 3: it compared 8 fields (what it covers: iteration, data position, RNG, optimizer moments, model weights, registered state (ema), other fields: counter, pid); it does not cover data order, an RNG consumed after the load and before the census, or a stateful object the trainer did not register"

# --- the census is identical, the resume diverged: said plainly
fixture "$T/fx" 3 0
run_rc silent --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 --save-at 3 --out "$T/silent" \
  --summary-md "$T/silent.md" --progress off
expect_rc 1 "census identical, resume diverged" silent
contains "$T/silent.out" "RESUME diverged at step 5: loss differs"
grep -Eq "CENSUS resume@3 +identical" "$T/silent.out" || fail "the census check is not identical"
contains "$T/silent.out" "$words"
json_check "$T/silent/report.json" '
s = d["census_silent"]
assert s["check"] == "CENSUS resume@3" and s["step"] == 3 and s["fields"] == 8, s
assert s["first_step_fields"] is None, s
assert s["covers"] == ["iteration", "data position", "RNG", "optimizer moments", "model weights",
                       "registered state (ema)", "other fields: counter, pid"], s["covers"]
assert s["text"].startswith("the census saw no difference at 3: it compared 8 fields"), s["text"]
c = [c for c in d["checks"] if c["kind"] == "census"][0]["census"]
assert c["covers"] == s["covers"], c["covers"]
'
contains "$T/silent.md" "the census saw no difference at 3"

# --- with equal first-step censuses: both counted
fixture "$T/fx-first" 3 1
run_rc first --trainer exec --train-cmd "$(fix_tmpl "$T/fx-first")" --steps 6 --save-at 3 --out "$T/first" --progress off
expect_rc 1 "census identical twice, resume diverged" first
contains "$T/first.out" "census: the census saw no difference at 3: it compared 8 fields after the load and 8 before the first step (what it covers: iteration,"
json_check "$T/first/report.json" 'assert d["census_silent"]["first_step_fields"] == 8, d["census_silent"]'

# --- control: a census that differs in a saved field says no such thing
fixture "$T/fx-differs" 0 0
run_rc differs --trainer exec --train-cmd "$(fix_tmpl "$T/fx-differs")" --steps 6 --save-at 3 --out "$T/differs" --progress off
expect_rc 1 "census differs" differs
contains "$T/differs.out" "counter: through 3, resumed 0 (saved: not restored by the load)"
lacks "$T/differs.out" "the census saw no difference"
json_check "$T/differs/report.json" 'assert d["census_silent"] is None, d["census_silent"]'

# --- control: no census at all, nothing is claimed of one
fixture "$T/fx-none" 3 none
run_rc none --trainer exec --train-cmd "$(fix_tmpl "$T/fx-none")" --steps 6 --save-at 3 --out "$T/none" --progress off
expect_rc 1 "no census" none
lacks "$T/none.out" "the census saw no difference"
json_check "$T/none/report.json" 'assert d["census_silent"] is None, d["census_silent"]'
finish
