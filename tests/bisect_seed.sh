#!/usr/bin/env bash
# bisect_seed.sh — the seed (docs/design.md §9): with bf16, a repeated MTP layer and
# the legacy first-microbatch policy, bisect names a module of the shared MTP
# layer whose backward at step 6, microbatch 0 passed TRUE (beta=0) in the
# resumed process against FALSE (beta=1) in the train-through process: the
# first event whose values differ. The flag-only differences before it (every
# module's first forward after the resume) are listed as harmless.
# Negative control: with the merged fix (resolve) the run is identical and
# bisect says so (exit 0, no first event); --git-bisect maps both to 1 / 0.
. "$(dirname "$0")/bisect_lib.sh"
SEED="--precision bf16 --mtp-repeated-layer"

mkrun legacy 1 $SEED --first-microbatch-policy legacy
bisect legacy
expect_rc 1 "bisect of the seed" legacy
contains "$T/legacy.txt" "located: step 6, microbatch 0, backward mtp/layers/0/"
contains "$T/legacy.txt" "through passed FALSE (beta=1), resume passed TRUE (beta=0)"
contains "$T/legacy.txt" "harmless here:"
jq_true "$T/legacy.json" 'd["verdict"] == "located" and fe["kind"] == "values"' "a value difference"
jq_true "$T/legacy.json" 't["step"] == 6 and t["mb"] == 0 and t["kind"] == "backward"' "step 6 mb 0 backward"
jq_true "$T/legacy.json" 't["name"].startswith("mtp/layers/0/") and r["name"] == t["name"]' "an MTP-layer module"
jq_true "$T/legacy.json" 't["fields"]["passed"] == "FALSE" and t["fields"]["beta"] == "1"' "through FALSE beta=1"
jq_true "$T/legacy.json" 'r["fields"]["passed"] == "TRUE" and r["fields"]["beta"] == "0"' "resume TRUE beta=0"
jq_true "$T/legacy.json" '"fp_main_grad" in fe["differing_fields"] and "passed" not in fe["differing_fields"]' "values, not flags, differ"
# every event before it has equal values (that is what "first" means)
jq_true "$T/legacy.json" 'all(p["through"]["fields"].get("fp_out") == p["resume"]["fields"].get("fp_out") for p in fe["before"])' "context before it agrees in values"
# harmless: flags differ, fingerprints equal, and the decoder's beta=0 into a zeroed buffer is among them
jq_true "$T/legacy.json" 'len(d["harmless"]) > 0 and all(h["through"]["fields"]["passed"] != h["resume"]["fields"]["passed"] and all(v == h["resume"]["fields"][k] for k, v in h["through"]["fields"].items() if k.startswith("fp_")) for h in d["harmless"])' "harmless = flag-only"
jq_true "$T/legacy.json" 'any(h["through"]["kind"] == "backward" and h["resume"]["fields"]["beta"] == "0" and h["through"]["name"].startswith("decoder/") for h in d["harmless"])' "decoder overwrite of a zeroed buffer is harmless"
"$RC_BIN" bisect "$T/legacy" --git-bisect >/dev/null 2>&1
r=$?
[ "$r" = 1 ] || fail "--git-bisect on the seed: exit $r, want 1 (bad)"

# negative control: the fix
mkrun resolve 0 $SEED --first-microbatch-policy resolve
bisect resolve
expect_rc 0 "bisect of the fixed run" resolve
contains "$T/resolve.txt" "no-divergence"
lacks "$T/resolve.txt" "located"
jq_true "$T/resolve.json" 'd["verdict"] == "no-divergence" and d["first_event"] is None and d["exit_code"] == 0' "no divergence"
"$RC_BIN" bisect "$T/resolve" --git-bisect >/dev/null 2>&1
r=$?
[ "$r" = 0 ] || fail "--git-bisect on the fix: exit $r, want 0 (good)"
finish
