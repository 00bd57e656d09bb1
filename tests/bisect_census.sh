#!/usr/bin/env bash
# bisect_census.sh — a state both legs save wrongly alike (the Adam moments
# down-cast to bf16 on save): the loaded checkpoint is identical to
# through@5, which says only that both legs wrote the same bytes; the state
# census says the processes do not hold the same state, names the moments
# with both fingerprints, and that the save wrote them so (the through
# leg's census of what its save wrote holds the resumed value). Negative
# control: the same run without the bug is identical and bisect exits 0.
. "$(dirname "$0")/bisect_lib.sh"

mkrun bf16 1 --inject moments-saved-in-bf16
bisect bf16
expect_rc 1 "bisect of moments-saved-in-bf16" bf16
contains "$T/bf16.txt" "'s: identical. Both processes wrote the same bytes"
grep -q "^  state census at step 5 (.*): [0-9]* saved fields differ, first optimizer.exp_avg[^:]*: through fp=[0-9a-f]*, resumed fp=[0-9a-f]* (saved: the save wrote fp=[0-9a-f]*, which differs from the saving process's fp=[0-9a-f]*; the resumed process has what was saved)" "$T/bf16.txt" ||
  fail "the census does not name the moments"
jq_true "$T/bf16.json" 'd["loaded_state"]["identical"] and d["census"]["compared"] and d["census"]["saved_differ"] > 0 and all(x["field"].startswith("optimizer.exp_avg") for x in d["census"]["differences"] if x["class"] == "saved")' "loaded state identical, census names only moments"

mkrun clean 0
bisect clean
expect_rc 0 "bisect of the clean run" clean
finish
