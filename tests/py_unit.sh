#!/usr/bin/env bash
# py_unit.sh — the Python package's unit tests (python/tests, plain
# unittest): byte-identical saves, the save/load round trip, COMPLETE last,
# refusals, trace, census, exec flags. Each negative control is in the test
# it belongs to (time tracking switched on, RNG not loaded, a fresh
# optimizer, a crash before COMPLETE against the same save without it).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch
cd "$T" || exit 1
"$PY" -m unittest discover -s "$RC_SRC/python/tests" -v >"$T/unit.log" 2>&1 || {
  fail "unittest failed"
  tail -n 60 "$T/unit.log" >&2
}
grep -Eq '^Ran [0-9]+ tests' "$T/unit.log" || fail "unittest ran nothing"
grep -q '^OK' "$T/unit.log" || fail "unittest did not say OK"
finish
