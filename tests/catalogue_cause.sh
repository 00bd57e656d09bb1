#!/usr/bin/env bash
# catalogue_cause.sh EXPECT_RC EXPECT_STEP EXPECT_FIRST [EXPECTATION...] -- [run flags...]
# A catalogue bug (docs/design.md §8) and the cause the report names, not
# only its exit code: runs `resumecheck run --steps 10 --save-at 5` (or the
# flags' own --save-at) with the flags, asserts the exit code, the first
# divergent step and trace column (catalogue.sh's signature), and then each
# EXPECTATION:
#   census=TEXT        the report's census line (report.json census_finding)
#                      contains TEXT
#   out=TEXT           the text report contains TEXT
#   always=TEXT        the text report contains TEXT, the control's too (the
#                      save points --save-at auto chose, an A/A verdict)
#   bisect=CAUSE:TEXT  `resumecheck bisect` of the run blames CAUSE
#                      (bisect.json cause.kind) and its text contains TEXT
# Negative control: the same flags without --inject NAME give an identical
# run (exit 0) whose census line and report lack every TEXT, and whose bisect
# has nothing to bisect (exit 0).
set -u
want_rc=$1 want_step=$2 want_first=$3
shift 3
expects=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  expects+=("$1")
  shift
done
[ $# -gt 0 ] && shift
flags=("$@")
t=$(mktemp -d)
fail=0
trap 'if [ "$fail" = 0 ]; then rm -rf "$t"; else echo "files kept in $t"; fi' EXIT
bad() {
  echo "FAIL: $*"
  fail=1
}

save=(--save-at 5)
for a in "${flags[@]}"; do [ "$a" = --save-at ] && save=(); done # the flags name their own K
# the control's flags: the same without --inject NAME
clean=()
skip=0
for a in "${flags[@]}"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  if [ "$a" = --inject ]; then skip=1; continue; fi
  clean+=("$a")
done

# finding FILE: the report's census line (empty when there is none)
finding() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("census_finding") or "")' "$1"
}

# check NAME: the run in $t/NAME against the expectations; negate=1 for the control
check() {
  local name=$1 negate=$2 e kind text
  local census
  census=$(finding "$t/$name/report.json")
  for e in "${expects[@]}"; do
    kind=${e%%=*} text=${e#*=}
    case $kind in
      census)
        if [ "$negate" = 0 ]; then
          grep -qF -- "$text" <<<"$census" || bad "$name: the census line lacks: $text (it says: $census)"
        elif grep -qF -- "$text" <<<"$census"; then
          bad "$name: the census line should not say: $text"
        fi
        ;;
      out)
        if [ "$negate" = 0 ]; then
          grep -qF -- "$text" "$t/$name.out" || bad "$name: the report lacks: $text"
        elif grep -qF -- "$text" "$t/$name.out"; then
          bad "$name: the report should not say: $text"
        fi
        ;;
      always)
        grep -qF -- "$text" "$t/$name.out" || bad "$name: the report lacks: $text"
        ;;
      bisect)
        local cause=${text%%:*} words=${text#*:} brc
        if [ ! -e "$t/$name.bisect.rc" ]; then # once per run, however many expectations
          "$RC_BIN" bisect "$t/$name" --json "$t/$name.bisect.json" >"$t/$name.bisect.txt" 2>&1
          echo $? >"$t/$name.bisect.rc"
        fi
        brc=$(cat "$t/$name.bisect.rc")
        if [ "$negate" = 0 ]; then
          [ "$brc" = 1 ] || bad "$name: bisect exit $brc, want 1"
          python3 - "$t/$name.bisect.json" "$cause" <<'PY' || bad "$name: bisect's cause is not $cause"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["cause"] and d["cause"]["kind"] == sys.argv[2] else 1)
PY
          grep -qF -- "$words" "$t/$name.bisect.txt" || bad "$name: bisect lacks: $words"
        else
          [ "$brc" = 0 ] || bad "$name: bisect of the clean run exit $brc, want 0"
          grep -qF -- "$words" "$t/$name.bisect.txt" && bad "$name: bisect of the clean run says: $words"
        fi
        ;;
      *) bad "unknown expectation $e" ;;
    esac
  done
}

"$RC_BIN" run "${flags[@]}" --steps 10 "${save[@]}" --out "$t/bug" >"$t/bug.out" 2>"$t/bug.err"
rc=$?
cat "$t/bug.out"
[ "$rc" = "$want_rc" ] || { bad "exit $rc, expected $want_rc"; cat "$t/bug.err"; }
if [ "$want_step" != "-" ]; then
  line=$(grep -m1 -E "RESUME diverged|diverged at step" "$t/bug.out" | grep -m1 -oE "at step [0-9]+: [a-z_0-9, ]+" | head -1)
  step=$(sed -E 's/at step ([0-9]+):.*/\1/' <<<"$line")
  first=$(sed -E 's/at step [0-9]+: ([a-z_0-9]+).*/\1/' <<<"$line")
  [ "$step" = "$want_step" ] || bad "first divergent step '$step', expected $want_step"
  [ "$first" = "$want_first" ] || bad "first diverging quantity '$first', expected $want_first"
fi
[ -s "$t/bug/report.json" ] || bad "no report.json"
[ "$fail" = 0 ] && check bug 0

# negative control: the same config without the bug
"$RC_BIN" run "${clean[@]}" --steps 10 "${save[@]}" --out "$t/clean" >"$t/clean.out" 2>"$t/clean.err"
rc=$?
[ "$rc" = 0 ] || { bad "control (no --inject): exit $rc, expected 0"; cat "$t/clean.out" "$t/clean.err"; }
[ "$fail" = 0 ] && check clean 1
exit $fail
