#!/usr/bin/env bash
# bisect_catalogue.sh BUG KIND FIELD [run flags...] — bisect names the event
# each catalogue bug (docs/design.md §8) first changes: the first value-differing
# event is of KIND with FIELD among its differing values, and the events
# before it agree in value. For KIND backward it must also be the log's first
# backward event. Negative control: the same flags without --inject give an
# identical run and bisect exit 0.
. "$(dirname "$0")/bisect_lib.sh"
bug=$1 kind=$2 field=$3
shift 3

mkrun bug 1 --inject "$bug" "$@"
bisect bug
expect_rc 1 "bisect of $bug" bug
contains "$T/bug.txt" "located: step 6"
contains "$T/bug.txt" ", $kind"
jq_true "$T/bug.json" 'd["verdict"] == "located" and d["loaded_state"]["identical"]' "loaded state identical to through@5"
jq_true "$T/bug.json" "t['step'] == 6 and t['kind'] == '$kind' and '$field' in fe['differing_fields']" "first event: $kind with $field differing"
jq_true "$T/bug.json" 'all(all(v == p["resume"]["fields"].get(k) for k, v in p["through"]["fields"].items() if k not in ("passed", "beta")) for p in fe["before"])' "events before it agree in value"
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
