#!/usr/bin/env bash
# run_report_aa_names.sh — an A/A failure's text report names the datasets
# that differ (docs/report-schema.md), not only report.json: "A/A failed:
# not deterministic (through@6 vs aa@6 differ in 4 datasets: ... (first
# 3))". The fixture trainer's aa leg writes other values in four datasets
# at 6 (a trainer that is not deterministic); the fake trainer's nondet
# mode differs in one file at 3. Control: the same run with an aa leg equal
# to through passes and prints no such line.
source "$(dirname "$0")/fixture_lib.sh"

# fixture DIR AA_DIFFERS
fixture() {
  local f=$1 differs=$2
  ckpts "$f/fresh/ckpt 3 /model/w=1,2 /optimizer/exp_avg/w=0.5 /rng/state=7 /extra/ema/0=1" \
    "$f/fresh/ckpt 6 /model/w=3,4 /optimizer/exp_avg/w=0.25 /rng/state=8 /extra/ema/0=2" \
    "$f/resumed/ckpt 6 /model/w=3,4 /optimizer/exp_avg/w=0.25 /rng/state=8 /extra/ema/0=2"
  if [ "$differs" = 1 ]; then
    ckpts "$f/aa/ckpt 3 /model/w=1,2 /optimizer/exp_avg/w=0.5 /rng/state=7 /extra/ema/0=1" \
      "$f/aa/ckpt 6 /model/w=3,9 /optimizer/exp_avg/w=0.5 /rng/state=9 /extra/ema/0=3"
  else
    mkdir -p "$f/aa" && cp -r "$f/fresh/ckpt" "$f/aa/"
  fi
  trace "$f/fresh/trace.csv" 1,5,0.5 2,4,0.4 3,3,0.3 4,2,0.2 5,1,0.1 6,0.5,0.05
  cp "$f/fresh/trace.csv" "$f/resumed/trace.csv"
  cp "$f/fresh/trace.csv" "$f/aa/trace.csv"
}

fixture "$T/fx" 1
run_rc nd --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 --save-at 3 --aa --out "$T/nd" --progress off
expect_rc 2 "an aa leg that differs" nd
contains "$T/nd.out" "A/A failed: not deterministic (through@6 vs aa@6 differ in 4 datasets: /rng/state, /optimizer/exp_avg/w, /model/w (first 3))"
json_true "$T/nd/report.json" "d['verdict'] == 'aa-failed' and d['first_divergence']['check'] == 'A/A@6'" "A/A@6 names the failure"

# the fake trainer's nondet mode: through vs save differ in one file
run_rc fake --trainer exec --train-cmd "$(tmpl --bug nondet)" --steps 6 --save-at 3 --out "$T/fake" --progress off
expect_rc 2 "non-deterministic fake trainer" fake
contains "$T/fake.out" "A/A failed: not deterministic, or the save leg is not a prefix (through@3 vs save@3 differ in 1 file: noise.txt)"

# control: a deterministic aa leg
fixture "$T/fx-ok" 0
run_rc ok --trainer exec --train-cmd "$(fix_tmpl "$T/fx-ok")" --steps 6 --save-at 3 --aa --out "$T/ok" --progress off
expect_rc 0 "control: an aa leg equal to through" ok
lacks "$T/ok.out" "A/A failed"
finish
