#!/usr/bin/env bash
# bisect_aa.sh — a run whose A/A check failed (non-determinism) makes any
# resume verdict inconclusive: bisect says so, exits 2, and 125 (untestable)
# under --git-bisect. A run whose leg failed is untestable (125). Negative
# control: a clean run is good (0) under --git-bisect.
. "$(dirname "$0")/bisect_lib.sh"

mkrun nondet 2 --inject nondeterministic-reduction
bisect nondet
expect_rc 2 "bisect of an A/A failure" nondet
contains "$T/nondet.txt" "inconclusive: the run's A/A check failed"
jq_true "$T/nondet.json" 'd["verdict"] == "inconclusive" and d["replay"] is None' "no replay for an A/A failure"
bisect nondet --git-bisect
expect_rc 125 "--git-bisect of an A/A failure" nondet

# a failed leg: the verdict of the report is leg-failed
mkrun clean 0
cp -r "$T/clean" "$T/legfail"
sed -i 's/"verdict": "identical"/"verdict": "leg-failed"/' "$T/legfail/report.json"
grep -q '"verdict": "leg-failed"' "$T/legfail/report.json" || fail "could not fake a leg-failed report"
bisect legfail --git-bisect
expect_rc 125 "--git-bisect of a failed leg" legfail
contains "$T/legfail.txt" "untestable"

# negative control
bisect clean --git-bisect
expect_rc 0 "--git-bisect of a clean run" clean
finish
