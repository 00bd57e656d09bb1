#!/usr/bin/env bash
# run_census_first_step.sh — the first-step census (docs/census.md): a
# trainer's census taken just before the first forward of step K+1
# (OUT/census/iter_K.rankR.first-step.txt), compared like the after-load
# one. Hand-made files through the fixture trainer: the after-load censuses
# agree, the first-step ones differ in the saved field rng.torch_cpu (a
# DataLoader that draws its base seed from the global RNG when it is
# created after the load): exit 1, the field named, "before the first step"
# said in the text, report.json, the Markdown summary and JUnit. Controls:
# equal first-step files exit 0; a first-step file on one side only is
# "not compared" (exit 0, no error); none at all leaves the report as it was.
source "$(dirname "$0")/fixture_lib.sh"

# fixture DIR THROUGH_FIRST RESUMED_FIRST: both legs' checkpoints, traces
# and after-load censuses agree; the first-step censuses' rng.torch_cpu
# values are the arguments ("-" writes no first-step file)
fixture() {
  local f=$1 a=$2 b=$3 role
  ckpts "$f/fresh/ckpt 3 /data/consumed_samples=12 /model/w=1,2" \
    "$f/fresh/ckpt 6 /data/consumed_samples=24 /model/w=3,4" \
    "$f/resumed/ckpt 6 /data/consumed_samples=24 /model/w=3,4"
  for role in fresh resumed; do
    trace "$f/$role/trace.csv" 1,5,0.5 2,4,0.4 3,3,0.3 4,2,0.2 5,1,0.1 6,0.5,0.05
    census "$f/$role/census/iter_0000003.rank0.txt" "iteration|saved|3" \
      "data.consumed_samples|saved|12" "rng.torch_cpu|saved|fp=1111111111111111" \
      "pid|local|$role|the process id"
  done
  [ "$a" = - ] || census "$f/fresh/census/iter_0000003.rank0.first-step.txt" "iteration|saved|3" \
    "data.consumed_samples|saved|12" "rng.torch_cpu|saved|fp=$a" "pid|local|fresh|the process id"
  [ "$b" = - ] || census "$f/resumed/census/iter_0000003.rank0.first-step.txt" "iteration|saved|3" \
    "data.consumed_samples|saved|12" "rng.torch_cpu|saved|fp=$b" "pid|local|resumed|the process id"
}

# --- the first-step census differs in a saved field: exit 1, "before the first step"
fixture "$T/fx" 1111111111111111 3333333333333333
run_rc fs --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 --save-at 3 --out "$T/fs" \
  --junit "$T/fs.xml" --summary-md "$T/fs.md" --progress off
expect_rc 1 "first-step census differs" fs
grep -Eq "RESUME@3→6 +identical" "$T/fs.out" || fail "the checkpoints at 6 should agree"
grep -Eq "CENSUS resume@3 +DIFFERS .*saved state identical.*; before the first step: 4 fields; 1 saved field differs" "$T/fs.out" ||
  fail "the census row does not say the first-step census differs"
contains "$T/fs.out" "    before the first step: rng.torch_cpu: through fp=1111111111111111, resumed fp=3333333333333333 (saved; equal in the census after the load: it changed between the load and the first step)"
contains "$T/fs.out" "census: state census at step 3 (resume@3): 1 saved field differs (0 after the load, 1 before the first step); first: before the first step: rng.torch_cpu"
contains "$T/fs.out" "RESUME diverged at the resume point"
json_check "$T/fs/report.json" '
c = [c for c in d["checks"] if c["kind"] == "census"][0]
assert c["status"] == "differs", c["status"]
assert c["census"]["saved_differ"] == 0 and c["census"]["differences"][0]["field"] == "pid", c["census"]
f = c["census"]["first_step"]
assert f["compared"] is True and f["only_in"] is None and f["fields"] == 4, f
assert f["saved_differ"] == 1 and f["local_differ"] == 1, f
s = [x for x in f["differences"] if x["class"] == "saved"]
assert len(s) == 1 and s[0]["field"] == "rng.torch_cpu" and s[0]["after_load"] == "equal", s
assert s[0]["text"].startswith("before the first step: rng.torch_cpu: through fp=1111111111111111"), s
assert "before the first step" in d["census_finding"], d["census_finding"]
assert d["census_silent"] is None, d["census_silent"]
'
contains "$T/fs.md" "before the first step: rng.torch\\_cpu"
xml_ok "$T/fs.xml" "JUnit"
contains "$T/fs.xml" "before the first step: rng.torch_cpu: through fp=1111111111111111, resumed fp=3333333333333333"

# --- control: equal first-step censuses
fixture "$T/fx-eq" 3333333333333333 3333333333333333
run_rc eq --trainer exec --train-cmd "$(fix_tmpl "$T/fx-eq")" --steps 6 --save-at 3 --out "$T/eq" --progress off
expect_rc 0 "control: equal first-step censuses" eq
grep -Eq "CENSUS resume@3 +identical .*; before the first step: 4 fields, saved state identical" "$T/eq.out" ||
  fail "control: the census row does not say both censuses agree"
json_check "$T/eq/report.json" '
f = [c for c in d["checks"] if c["kind"] == "census"][0]["census"]["first_step"]
assert f["compared"] is True and f["saved_differ"] == 0, f
'

# --- only the through leg wrote one: not compared, not an error
fixture "$T/fx-one" 1111111111111111 -
run_rc one --trainer exec --train-cmd "$(fix_tmpl "$T/fx-one")" --steps 6 --save-at 3 --out "$T/one" --progress off
expect_rc 0 "a first-step census on one side only" one
contains "$T/one.out" "before the first step: not compared, only through wrote a census"
json_check "$T/one/report.json" '
f = [c for c in d["checks"] if c["kind"] == "census"][0]["census"]["first_step"]
assert f == {"compared": False, "only_in": "through", "fields": 0, "saved_differ": 0, "derived_differ": 0, "copy_differ": 0, "local_differ": 0, "differences": []}, f
'

# --- neither: the report as before
fixture "$T/fx-none" - -
run_rc none --trainer exec --train-cmd "$(fix_tmpl "$T/fx-none")" --steps 6 --save-at 3 --out "$T/none" --progress off
expect_rc 0 "no first-step census" none
lacks "$T/none.out" "before the first step"
json_check "$T/none/report.json" '
c = [c for c in d["checks"] if c["kind"] == "census"][0]
assert c["status"] == "identical" and c["census"]["first_step"] is None, c["census"]
'
finish
