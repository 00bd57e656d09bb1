#!/usr/bin/env bash
# compare_h5diff.sh — what h5diff (1.10) and `resumecheck compare` each say
# about the crafted pairs of test_compare.c. docs/compare.md has the table;
# this test keeps it true: it asserts h5diff's exit code and, where h5diff
# passes a pair that differs, the note it prints instead of failing.
# Usage: compare_h5diff.sh PATH/TO/compare_unit   (RC_BIN from ctest)
set -u
command -v h5diff >/dev/null 2>&1 || { echo "h5diff not installed: skipping"; exit 77; }
gen=${1:?usage: compare_h5diff.sh PATH/TO/compare_unit}
: "${RC_BIN:?RC_BIN not set}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rc_h5diff_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$gen" --make-pairs "$tmp" || { echo "FAIL: could not make the pairs"; exit 1; }

fail=0
# case  h5diff exit  resumecheck exit  what h5diff prints by default when it
# passes a pair ("silent": nothing at all; "-": not checked)
while read -r name want_h5 want_rc note; do
  [ -z "$name" ] && continue
  a=$tmp/$name/a.h5 b=$tmp/$name/b.h5
  out=$(h5diff "$a" "$b" 2>&1); got_h5=$?
  "$RC_BIN" compare "$a" "$b" >/dev/null 2>&1; got_rc=$?
  if [ "$got_h5" != "$want_h5" ]; then
    echo "FAIL $name: h5diff exit $got_h5, expected $want_h5"; echo "$out"; fail=1
  fi
  if [ "$got_rc" != "$want_rc" ]; then
    echo "FAIL $name: resumecheck compare exit $got_rc, expected $want_rc"; fail=1
  fi
  if [ "$note" = silent ] && [ -n "$out" ]; then
    echo "FAIL $name: h5diff printed something:"; echo "$out"; fail=1
  elif [ "$note" != "-" ] && [ "$note" != silent ] && ! grep -q -- "${note//_/ }" <<<"$out"; then
    echo "FAIL $name: h5diff output lacks '${note//_/ }'"; echo "$out"; fail=1
  fi
  echo "$name: h5diff $got_h5, resumecheck $got_rc"
done <<'TABLE'
identical      0 0 -
flip_f32       1 1 -
flip_f64       1 1 -
neg_zero       1 1 -
nan_one_side   1 1 -
nan_payload    0 1 silent
shape          0 1 Some_objects_are_not_comparable
dtype          0 1 silent
missing_extra  1 1 -
attr           1 1 -
be             0 1 silent
note           1 1 -
layout         0 0 -
TABLE

# The dtype change is mentioned only with -v, as a warning, still exit 0.
out=$(h5diff -v "$tmp/dtype/a.h5" "$tmp/dtype/b.h5" 2>&1); got=$?
if [ $got != 0 ] || ! grep -q "different storage datatype" <<<"$out"; then
  echo "FAIL dtype -v: exit $got, output: $out"; fail=1
fi

# h5diff did compare /model/w of the NaN pair (it is not skipped): it reads
# the two payloads as equal. The nan_one_side row is the control: one NaN
# against a number it does report.
out=$(h5diff -r "$tmp/nan_payload/a.h5" "$tmp/nan_payload/b.h5" /model/w 2>&1)
grep -q "0 differences found" <<<"$out" || { echo "FAIL nan_payload: h5diff -r says: $out"; fail=1; }
exit $fail
