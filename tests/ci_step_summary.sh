#!/usr/bin/env bash
# ci_step_summary.sh — $GITHUB_STEP_SUMMARY (docs/ci.md): set, and no
# --summary-md given, `run` appends its Markdown summary to that file:
# what earlier steps wrote stays, the file keeps its inode (appended in
# place, never renamed over), a second run appends a second summary; a
# missing file in an existing directory is created. Refused untouched,
# with a one-line warning and the verdict's exit code: a FIFO (not waited
# for), a directory, a symlink to a FIFO, a path whose directory is
# missing. Controls: unset or empty, and with --summary-md given, the file
# is not touched (--summary-md gets the summary).
. "$(dirname "$0")/run_lib.sh"
cd "$T" || exit 1
n=0
gh_run() { # NAME GITHUB_STEP_SUMMARY-VALUE [run flags...]
  local name=$1 val=$2
  shift 2
  n=$((n + 1))
  GITHUB_STEP_SUMMARY=$val timeout 120 "$RC_BIN" run --steps 4 --save-at 2 --out "$T/r$n" \
    --progress off "$@" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
}
HEAD="## resumecheck: IDENTICAL (exit 0)"

printf '# earlier step\n' >"$T/sum.md"
ino=$(stat -c %i "$T/sum.md")
gh_run first "$T/sum.md"
expect_rc 0 "first run" first
[ "$(head -1 "$T/sum.md")" = "# earlier step" ] || fail "the earlier step's text is gone"
[ "$(grep -cxF "$HEAD" "$T/sum.md")" = 1 ] || fail "no summary appended: $(cat "$T/sum.md")"
gh_run second "$T/sum.md"
[ "$(grep -cxF "$HEAD" "$T/sum.md")" = 2 ] || fail "second run did not append a second summary"
[ "$(stat -c %i "$T/sum.md")" = "$ino" ] || fail "the summary file was replaced, not appended to"
lacks "$T/first.err" "GITHUB_STEP_SUMMARY"
gh_run create "$T/new.md"
grep -qxF "$HEAD" "$T/new.md" 2>/dev/null || fail "a missing file in an existing directory was not created"

# refused, untouched, a warning, the verdict's exit code
refused() { # NAME PATH
  gh_run "$1" "$2"
  expect_rc 0 "$1: exit code" "$1"
  contains "$T/$1.err" "warning: GITHUB_STEP_SUMMARY not written"
  [ "$(grep -c GITHUB_STEP_SUMMARY "$T/$1.err")" = 1 ] || fail "$1: warning is not one line"
}
mkfifo "$T/fifo"
refused fifo "$T/fifo"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
contains "$T/fifo.err" "$T/fifo is a FIFO, not a regular file: left untouched"
mkdir "$T/dir"
refused dir "$T/dir"
[ -d "$T/dir" ] && [ -z "$(ls -A "$T/dir")" ] || fail "the directory was touched"
ln -s "$T/fifo" "$T/link"
refused link "$T/link"
[ -L "$T/link" ] && [ -p "$T/fifo" ] || fail "the symlink or its FIFO was replaced"
refused nodir "$T/missing/sum.md"
[ ! -e "$T/missing" ] || fail "a missing directory was created"

# controls: unset, empty, or --summary-md given: not touched
cp "$T/sum.md" "$T/before.md"
unset GITHUB_STEP_SUMMARY
"$RC_BIN" run --steps 4 --save-at 2 --out "$T/r-unset" --progress off >/dev/null 2>&1
cmp -s "$T/sum.md" "$T/before.md" || fail "changed with the variable unset"
gh_run empty ""
expect_rc 0 "empty variable" empty
gh_run given "$T/sum.md" --summary-md "$T/given.md"
cmp -s "$T/sum.md" "$T/before.md" || fail "appended although --summary-md was given"
grep -qxF "$HEAD" "$T/given.md" || fail "--summary-md did not get the summary"
ls -A "$T"/r*/ | grep -q step-summary && fail "a scratch file was left in a run directory"

[ "$fails" = 0 ] && echo "ci_step_summary: all checks passed"
exit $((fails > 0))
