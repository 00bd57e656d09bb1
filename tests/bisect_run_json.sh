#!/usr/bin/env bash
# bisect_run_json.sh — `run --json FILE` with FILE outside the run directory
# still leaves DIR/report.json (the same bytes), so `bisect DIR` finds the
# run: a grad-buffer bug is located at step 6 as with the default report
# path. Reading: bisect refuses a report.json whose schema_version is newer
# than it knows and one that is another kind of report (65), and reads the
# unmodified copy. Negative control: with the directory's copy switched off
# (RC_TEST_REPORT_ONLY_AT_JSON=1, the behaviour before) bisect DIR finds no
# report.json (66).
. "$(dirname "$0")/bisect_lib.sh"

mkrun bug 1 --inject grad-buffer-not-zeroed-after-load --json "$T/elsewhere.json"
[ -f "$T/elsewhere.json" ] || fail "run wrote no --json FILE"
cmp -s "$T/elsewhere.json" "$T/bug/report.json" || fail "DIR/report.json is not the --json FILE's report"
bisect bug
expect_rc 1 "bisect DIR after run --json elsewhere" bug
contains "$T/bug.txt" "located: step 6"
jq_true "$T/bug.json" 'd["schema"] == "resumecheck.bisect-report" and d["schema_version"] == 1 and d["verdict"] == "located"' "bisect.json names itself, located"

# the reader: a newer schema_version and another kind are refused
for v in newer other same; do
  mkdir -p "$T/$v"
  cp "$T/bug/report.json" "$T/$v/report.json"
done
sed -i 's/"schema_version": 1,/"schema_version": 2,/' "$T/newer/report.json"
sed -i 's/"schema": "resumecheck.run-report"/"schema": "resumecheck.compare-report"/' "$T/other/report.json"
grep -q '"schema_version": 2,' "$T/newer/report.json" || fail "could not fake a newer report"
grep -q '"resumecheck.compare-report"' "$T/other/report.json" || fail "could not fake a compare report"
bisect newer
expect_rc 65 "a newer schema_version" newer
contains "$T/newer.txt" "schema_version 2, newer than this build reads (1)"
bisect other
expect_rc 65 "a compare report" other
contains "$T/other.txt" "not a resumecheck run report (schema \"resumecheck.compare-report\""
# the unmodified copy is read (the identical verdict is cheap: nothing to replay)
sed -i 's/"verdict": "resume-diverged"/"verdict": "identical"/' "$T/same/report.json"
bisect same
expect_rc 0 "the unmodified schema" same

# negative control: the report only at FILE, as before
RC_TEST_REPORT_ONLY_AT_JSON=1 mkrun only 0 --json "$T/only.json"
[ -f "$T/only/report.json" ] && fail "RC_TEST_REPORT_ONLY_AT_JSON=1 still wrote DIR/report.json"
bisect only
expect_rc 66 "bisect DIR without its report.json (negative control)" only
contains "$T/only.txt" "no report.json"
finish
