#!/usr/bin/env bash
# run_report_first_cause.sh — the "first differing dataset" of run's report
# is ranked by what diverged first, not by file order (docs/report-schema.md,
# "The headline difference"): an optimizer-moment bug makes the moments,
# the weights and the EMA differ at N, and /extra/ema/0 comes first in path
# order. Ranked by the kind of state the headline is /optimizer/exp_avg/w;
# when the census names a saved field that differs (model.w), the dataset
# holding it is the headline. Every differing dataset stays listed and
# first_difference keeps path order. Control: RC_TEST_FIRST_IN_PATH_ORDER=1
# (the ranking off) makes the headline /extra/ema/0 again, and the same
# assertion then fails.
source "$(dirname "$0")/fixture_lib.sh"

# fixture DIR CENSUS: the resumed leg's moments, weights and EMA differ at
# 6, its trace from step 4; CENSUS=1 writes censuses whose model.w differs
fixture() {
  local f=$1 with_census=$2
  ckpts "$f/fresh/ckpt 3 /model/w=1,2 /optimizer/exp_avg/w=0.5,0.5 /data/consumed_samples=12 /extra/ema/0=1,1" \
    "$f/fresh/ckpt 6 /model/w=3,4 /optimizer/exp_avg/w=0.25,0.25 /data/consumed_samples=24 /extra/ema/0=2,2" \
    "$f/resumed/ckpt 6 /model/w=3,5 /optimizer/exp_avg/w=0.25,0.75 /data/consumed_samples=24 /extra/ema/0=2,3"
  trace "$f/fresh/trace.csv" 1,5,0.5 2,4,0.4 3,3,0.3 4,2,0.2 5,1,0.1 6,0.5,0.05
  trace "$f/resumed/trace.csv" 4,2,0.25 5,1.5,0.1 6,0.75,0.05
  [ "$with_census" = 1 ] || return 0
  census "$f/fresh/census/iter_0000003.rank0.txt" "iteration|saved|3" "model.w|saved|fp=1111111111111111" \
    "optimizer.exp_avg.w|saved|fp=2222222222222222"
  census "$f/resumed/census/iter_0000003.rank0.txt" "iteration|saved|3" "model.w|saved|fp=9999999999999999" \
    "optimizer.exp_avg.w|saved|fp=2222222222222222"
}

# headline NAME WANT WHY: the text report and report.json name WANT first
# (ranked by WHY), first_difference stays /extra/ema/0 (path order) and all
# three differing datasets are listed; non-zero when not
headline() {
  local name=$1 want=$2 why=$3
  grep -q "^  first differing dataset: $want " "$T/$name.out" || return 1
  grep -q "^  ranked first by $why" "$T/$name.out" || return 1
  "$PY" - "$T/$name/report.json" "$want" "$why" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want, why = sys.argv[2], sys.argv[3]
s = [c for c in d["checks"] if c["name"] == "RESUME@3→6"][0]["state"]
assert s["headline_difference"].startswith(want + " "), s["headline_difference"]
assert s["headline_rule"].startswith(why), s["headline_rule"]
assert s["first_difference"].startswith("/extra/ema/0 "), s["first_difference"]
objs = {x["object"] for x in s["diffs"] if x["kind"] == "values"}
assert objs == {"/extra/ema/0", "/model/w", "/optimizer/exp_avg/w"}, objs
f = d["first_divergence"]
assert f["headline"].startswith(want + " ") and f["headline_rule"].startswith(why), f
assert f["dataset"].startswith("/extra/ema/0 "), f
PY
}

# --- no census: ranked by the kind of state, optimizer state first
fixture "$T/fx" 0
run_rc kind --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 --save-at 3 --out "$T/kind" \
  --summary-md "$T/kind.md" --progress off
expect_rc 1 "an optimizer-moment divergence" kind
headline kind /optimizer/exp_avg/w "kind of state: optimizer state" ||
  fail "the headline is not /optimizer/exp_avg/w by kind of state"
contains "$T/kind.md" "- first differing dataset: \`/optimizer/exp_avg/w"

# --- the census names model.w: the dataset holding it comes first
fixture "$T/fx-census" 1
run_rc census --trainer exec --train-cmd "$(fix_tmpl "$T/fx-census")" --steps 6 --save-at 3 --out "$T/census" --progress off
expect_rc 1 "the census names model.w" census
headline census /model/w "the census: saved field model.w differs after the load" ||
  fail "the headline is not /model/w, the dataset of the census's field"

# --- control: the ranking off, file order again, and the assertion fails
RC_TEST_FIRST_IN_PATH_ORDER=1 run_rc plain --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 \
  --save-at 3 --out "$T/plain" --progress off
expect_rc 1 "control run" plain
grep -q "^  first differing dataset: /extra/ema/0 " "$T/plain.out" || fail "control: path order does not name /extra/ema/0 first"
headline plain /optimizer/exp_avg/w "kind of state: optimizer state" 2>/dev/null &&
  fail "control: the assertion holds with the ranking off"
finish
