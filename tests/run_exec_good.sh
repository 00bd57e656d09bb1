#!/usr/bin/env bash
# run_exec_good.sh — a correct exec trainer: every check identical, exit 0,
# and every report well-formed (report.json with its schema, JUnit XML, the
# SVG plot, the Markdown summary), logs and progress lines as documented.
source "$(dirname "$0")/run_lib.sh"

run_rc good --trainer exec --train-cmd "$(tmpl --census good)" --steps 8 --save-at 3,5 --aa --jobs 2 \
  --out "$T/good" --junit "$T/good.xml" --plot "$T/good.svg" --summary-md "$T/good.md" \
  --progress plain
expect_rc 0 "a correct trainer" good
contains "$T/good.out" "A/A identical (through@3 vs save@3: 4/4 files byte-identical; args.json differs by construction)"
contains "$T/good.out" "RESUME identical (through@8 vs resume@5→8"
contains "$T/good.out" "verdict: IDENTICAL (exit 0"
lacks "$T/good.out" "DIFFERS"

R="$T/good/report.json"
[ -f "$R" ] || fail "no report.json in --out"
json_true "$R" "d['schema'] == 'resumecheck.run-report' and d['schema_version'] == 1" "schema name and version"
json_true "$R" "d['verdict'] == 'identical' and d['exit_code'] == 0 and d['first_divergence'] is None" "verdict"
json_true "$R" "[l['label'] for l in d['legs']] == ['through', 'save', 'aa', 'resume@3', 'resume@5']" "legs"
json_true "$R" "all(l['status'] == 'ok' and l['exit_code'] == 0 and l['wall_s'] >= 0 for l in d['legs'])" "legs ok"
json_true "$R" "len(d['checks']) == 10 and all(c['status'] == 'identical' for c in d['checks'])" "checks identical"
json_true "$R" "d['config']['steps'] == 8 and d['config']['save_at'] == [3, 5] and d['config']['trainer'] == 'exec'" "config"
json_true "$R" "[c['trace']['steps_compared'] for c in d['checks'] if c['kind'] == 'trace'] == [3, 8, 2, 3]" "trace steps compared"
json_true "$R" "[(c['name'], c['census']['fields']) for c in d['checks'] if c['kind'] == 'census'] == [('CENSUS resume@3', 5), ('CENSUS resume@5', 5)]" "census checks"

xml_ok "$T/good.xml" "JUnit"
contains "$T/good.xml" 'tests="15" failures="0" errors="0"'
contains "$T/good.xml" 'name="RESUME@5→8"'
xml_ok "$T/good.svg" "the SVG plot"
contains "$T/good.svg" "<polyline"
contains "$T/good.svg" ">K=3<"
contains "$T/good.svg" ">K=5<"
contains "$T/good.md" "## resumecheck: IDENTICAL (exit 0)"
contains "$T/good.md" "| A/A@3 | identical |"

# every leg: its own directory, its log starting with the command
head -1 "$T/good/save/log.txt" | grep -q '^\$ bash .*--stop-at 3 --save-at 3' || fail "log.txt starts with the command"
contains "$T/good/resume@5/log.txt" "trained steps 6..8"
# plain progress: one line per leg start and end, no terminal escapes
contains "$T/good.err" "leg through started (steps 0→8)"
contains "$T/good.err" "leg resume@5 finished"
if grep -q $'\033' "$T/good.err"; then fail "plain progress has terminal escapes"; fi

# --progress off is silent; --progress live redraws with escapes
run_rc off --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/off" --progress off
expect_rc 0 "progress off" off
[ -s "$T/off.err" ] && fail "--progress off wrote to stderr: $(head -3 "$T/off.err")"
run_rc live --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/live" --progress live
expect_rc 0 "progress live" live
grep -q $'\033\\[' "$T/live.err" || fail "live progress uses terminal escapes"

# --save-at every: one resume leg per K
run_rc every --trainer exec --train-cmd "$(tmpl)" --steps 5 --save-at every --out "$T/every" \
  --json "$T/every.json" --progress off
expect_rc 0 "save-at every" every
json_true "$T/every.json" "sorted(l['label'] for l in d['legs'] if l['name'].startswith('resume')) == ['resume@1', 'resume@2', 'resume@3', 'resume@4']" "every: four resume legs"
json_true "$T/every.json" "sum(1 for c in d['checks'] if c['class'] == 'aa' and c['kind'] == 'state') == 4" "every: A/A at each K"
# --json FILE is a copy: the run directory keeps its own report.json (bisect reads it)
cmp -s "$T/every.json" "$T/every/report.json" || fail "--json FILE: DIR/report.json is not the same report"

# a rerun into the same --out is refused, and allowed with --overwrite
run_rc again --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/off" --progress off
expect_rc 64 "rerun without --overwrite" again
contains "$T/again.err" "already exists"
run_rc over --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/off" --progress off --overwrite
expect_rc 0 "rerun with --overwrite" over
finish
