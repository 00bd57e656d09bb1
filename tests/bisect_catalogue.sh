#!/usr/bin/env bash
# bisect_catalogue.sh BUG KIND FIELD CAUSE CENSUS [run flags...] — bisect names the
# event each catalogue bug (docs/design.md §8) first changes: the first
# value-differing event is of KIND with FIELD among its differing values, and
# the events before it agree in value. For KIND backward it must also be the
# log's first backward event. CAUSE is what bisect blames: `operation` (the
# event computed the value) or `resume-state` (the value is an input of step
# K+1: the state the resumed process started from); CENSUS is the state
# census field that then names it (`-` for an operation: the saved state
# is identical and the census says so).
# Negative control: the same flags without --inject give an identical run and
# bisect exit 0.
. "$(dirname "$0")/bisect_lib.sh"
bug=$1 kind=$2 field=$3 cause=$4 census=$5
shift 5

mkrun bug 1 --inject "$bug" "$@"
bisect bug
expect_rc 1 "bisect of $bug" bug
contains "$T/bug.txt" "located: step 6"
contains "$T/bug.txt" ", $kind"
jq_true "$T/bug.json" 'd["verdict"] == "located" and d["loaded_state"]["identical"]' "loaded state identical to through@5"
jq_true "$T/bug.json" "t['step'] == 6 and t['kind'] == '$kind' and '$field' in fe['differing_fields']" "first event: $kind with $field differing"
jq_true "$T/bug.json" 'all(all(v == p["resume"]["fields"].get(k) for k, v in p["through"]["fields"].items() if k not in ("passed", "beta")) for p in fe["before"])' "events before it agree in value"
jq_true "$T/bug.json" "d['cause']['kind'] == '$cause' and d['cause']['step'] == 6" "cause: $cause"
if [ "$cause" = resume-state ]; then
  contains "$T/bug.txt" "the state the resumed process started step 6 from differs from the through process's"
  grep -q "the state census at step 5: [0-9]* saved fields* differs*, first $census[^ ]*: through [^,]*, resumed .* (saved: not restored by the load)" "$T/bug.txt" ||
    fail "bisect does not name $census from the census"
  contains "$T/bug.txt" "not a save-time side effect: replayed without its save at step 5"
  jq_true "$T/bug.json" "d['census']['compared'] and any(x['class'] == 'saved' and x['field'].startswith('$census') for x in d['census']['differences']) and d['replay']['probe']['agrees_with_resume'] is False" "the census names $census; the probe still differs"
else
  lacks "$T/bug.txt" "the state the resumed process started"
  contains "$T/bug.txt" "state census at step 5"
  jq_true "$T/bug.json" "d['census']['compared'] and d['census']['saved_differ'] == 0" "saved state identical in the census"
fi
if [ "$kind" = backward ]; then
  first_bw=$(grep -n -m1 "kind=backward" "$T/bug/bisect/through.events" | cut -d: -f1)
  jq_true "$T/bug.json" "t['line'] == ${first_bw:-0}" "the first backward event of the step (line $first_bw)"
fi

# negative control: no bug, no divergence
mkrun clean 0 "$@"
bisect clean
expect_rc 0 "bisect of the clean run" clean
contains "$T/clean.txt" "no-divergence"
finish
