#!/usr/bin/env bash
# run_census_robust.sh — census files as trainers write them, not as the
# format hopes (docs/census.md): CRLF line ends are accepted (the CR is not
# part of the value: a Windows-written census agrees with an LF one), and a
# value holding ESC reaches the terminal as \x1b. Controls: a CRLF census
# whose value really differs still fails naming it, shown without a CR; the
# escaped value is raw in report.json, so the census did hold the byte.
source "$(dirname "$0")/fixture_lib.sh"

# fixture DIR RESUMED_COUNTER CRLF TAG: through's census has counter 3 and
# tag a<ESC>[31mred; CRLF=1 writes it with CRLF line ends; the resumed
# leg's census (LF) has the counter and tag given
fixture() {
  local f=$1 counter=$2 crlf=$3 tag=$4
  ckpts "$f/fresh/ckpt 3 /model/w=1,2" "$f/fresh/ckpt 6 /model/w=3,4" "$f/resumed/ckpt 6 /model/w=3,4"
  trace "$f/fresh/trace.csv" 1,5,0.5 2,4,0.4 3,3,0.3 4,2,0.2 5,1,0.1 6,0.5,0.05
  cp "$f/fresh/trace.csv" "$f/resumed/trace.csv"
  census "$f/fresh/census/iter_0000003.rank0.txt" "iteration|saved|3" "counter|saved|3" \
    "tag|saved|"$'a\e[31mred'
  if [ "$crlf" = 1 ]; then
    sed -i 's/$/\r/' "$f/fresh/census/iter_0000003.rank0.txt"
    grep -q $'\r$' "$f/fresh/census/iter_0000003.rank0.txt" || fail "could not write a CRLF census"
  fi
  census "$f/resumed/census/iter_0000003.rank0.txt" "iteration|saved|3" "counter|saved|$counter" \
    "tag|saved|$tag"
}

# --- CRLF against LF, the same values: identical
fixture "$T/fx" 3 1 $'a\e[31mred'
run_rc crlf --trainer exec --train-cmd "$(fix_tmpl "$T/fx")" --steps 6 --save-at 3 --out "$T/crlf" --progress off
expect_rc 0 "a CRLF census against an LF one" crlf
grep -Eq "CENSUS resume@3 +identical +through@3 vs resume@3 \(after loading 3\): 3 fields, saved state identical$" "$T/crlf.out" ||
  fail "the CRLF census does not compare identical"

# --- control: CRLF, and the counter really differs: named, no CR in the line
fixture "$T/fx-differs" 0 1 $'a\e[31mred'
run_rc crlf-differs --trainer exec --train-cmd "$(fix_tmpl "$T/fx-differs")" --steps 6 --save-at 3 \
  --out "$T/crlf-differs" --progress off
expect_rc 1 "a CRLF census with a difference" crlf-differs
grep -q "^    counter: through 3, resumed 0 (saved: not restored by the load)$" "$T/crlf-differs.out" ||
  fail "the counter is not named as it differs"
grep -q $'\r' "$T/crlf-differs.out" && fail "a CR reached the text report"
json_check "$T/crlf-differs/report.json" '
c = [c for c in d["checks"] if c["kind"] == "census"][0]["census"]
assert [x["field"] for x in c["differences"]] == ["counter"], c["differences"]
'

# --- a value holding ESC: \x1b on the terminal
fixture "$T/fx-esc" 3 0 b
run_rc esc --trainer exec --train-cmd "$(fix_tmpl "$T/fx-esc")" --steps 6 --save-at 3 --out "$T/esc" --progress off
expect_rc 1 "a census value with ESC" esc
contains "$T/esc.out" "tag: through a\\x1b[31mred, resumed b (saved: not restored by the load)"
grep -q $'\e' "$T/esc.out" && fail "a raw ESC reached the text report"
# control: the census held the byte, and report.json keeps it as written
json_check "$T/esc/report.json" '
c = [c for c in d["checks"] if c["kind"] == "census"][0]["census"]
t = [x for x in c["differences"] if x["field"] == "tag"][0]
assert t["through"] == "a\x1b[31mred" and t["resumed"] == "b", t
'
finish
