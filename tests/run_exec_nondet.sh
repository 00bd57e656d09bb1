#!/usr/bin/env bash
# run_exec_nondet.sh — a trainer that writes different bytes every run: the
# A/A check fails, the verdict says the resume result is inconclusive,
# exit 2 (125 with --git-bisect). Controls: a correct trainer with
# --git-bisect exits 0, a resume bug with --git-bisect exits 1.
source "$(dirname "$0")/run_lib.sh"

run_rc nd --trainer exec --train-cmd "$(tmpl --bug nondet)" --steps 6 --save-at 3 --out "$T/nd" --progress off
expect_rc 2 "non-deterministic trainer" nd
contains "$T/nd.out" "A/A FAILED (through@3 vs save@3"
contains "$T/nd.out" "inconclusive"
contains "$T/nd.out" "verdict: A/A FAILED (exit 2"
json_true "$T/nd/report.json" "d['verdict'] == 'aa-failed' and d['first_divergence']['check'] == 'A/A@3'" "A/A verdict"
json_true "$T/nd/report.json" "'noise.txt' in d['first_divergence']['dataset']" "names noise.txt"

run_rc ndb --trainer exec --train-cmd "$(tmpl --bug nondet)" --steps 6 --save-at 3 --out "$T/ndb" --progress off --git-bisect
expect_rc 125 "A/A failure under --git-bisect is untestable" ndb
run_rc okb --trainer exec --train-cmd "$(tmpl)" --steps 6 --save-at 3 --out "$T/okb" --progress off --git-bisect
expect_rc 0 "control: correct trainer under --git-bisect" okb
run_rc fb --trainer exec --train-cmd "$(tmpl --bug forget-momentum)" --steps 6 --save-at 3 --out "$T/fb" --progress off --git-bisect
expect_rc 1 "control: resume bug under --git-bisect" fb
finish
