#!/usr/bin/env bash
# install.sh — `cmake --install BUILD --prefix P` into a fresh temporary
# prefix, then the installed tree, not the build tree:
#   - bin/resumecheck runs from P: --version on every subcommand prints the
#     version report.json's tool.version carries; a CPU run of 4 steps with a
#     save at 2 is IDENTICAL;
#   - share/doc/resumecheck/ holds README.md and every docs/*.md;
#   - share/man/man1/resumecheck.1 renders (man -l, else groff) and names
#     every visible flag of every subcommand; control: the same check on the
#     top-level --help alone misses flags (the check can fail);
#   - share/bash-completion/completions/resumecheck, sourced in bash, is
#     registered (complete -p) and completes subcommands, flags per
#     subcommand (run also the train flags it forwards) and CHOICE values;
#     controls: an unknown flag, a train flag `run` refuses (--stop-at), a
#     flag of another subcommand complete to nothing;
#   - the CUDA module: with a CUDA build it is under P/lib/resumecheck/ and
#     the installed binary finds it there; a copy of the binary moved away
#     from its lib/ says it is not installed (exit 125) on --device cuda.
#     Without CUDA, --device cuda says the build has none (exit 125).
set -u
: "${RC_BIN:?}" "${RC_BUILD_DIR:?}" "${RC_CMAKE:?}" "${RC_SRC:?}"
T=$(mktemp -d /tmp/rc_install_test.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
unset RC_CUDA_MODULE GITHUB_STEP_SUMMARY # the installed layout alone decides

P=$T/prefix
"$RC_CMAKE" --install "$RC_BUILD_DIR" --prefix "$P" >"$T/install.log" 2>&1 ||
  { cat "$T/install.log" >&2; fail "cmake --install failed"; exit 1; }
BIN=$P/bin/resumecheck
[ -x "$BIN" ] || { fail "no $BIN"; exit 1; }

# --- version: every subcommand, and the version the report carries
cd "$T" || exit 1
"$BIN" run --steps 4 --save-at 2 --out "$T/run" --progress off >"$T/run.out" 2>"$T/run.err"
rc=$?
[ "$rc" = 0 ] || { fail "installed run: exit $rc"; cat "$T/run.out" "$T/run.err" >&2; }
grep -q "verdict: IDENTICAL" "$T/run.out" || fail "installed run: not IDENTICAL"
report_version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tool"]["version"])' \
  "$T/run/report.json" 2>/dev/null)
[ -n "$report_version" ] || fail "report.json has no tool.version"
want="resumecheck $report_version"
[ "$("$BIN" --version)" = "$want" ] || fail "--version: '$("$BIN" --version)', want '$want'"
subs=$(RC_HELP_FORMAT=complete "$BIN" --help)
[ "$(echo "$subs" | wc -w)" -ge 6 ] || fail "subcommand list: '$subs'"
for s in $subs; do
  got=$("$BIN" "$s" --version 2>&1)
  [ "$got" = "$want" ] || fail "$s --version: '$got', want '$want'"
done
# control: a different version string is told apart
[ "$("$BIN" --version)" != "resumecheck $report_version.x" ] || fail "version compare is blind"

# --- docs
[ -f "$P/share/doc/resumecheck/README.md" ] || fail "no share/doc/resumecheck/README.md"
for d in "$RC_SRC"/docs/*.md; do
  cmp -s "$d" "$P/share/doc/resumecheck/docs/$(basename "$d")" ||
    fail "share/doc/resumecheck/docs/$(basename "$d") missing or not the source's"
done

# --- man page
man_flags() { # the flags a rendered page $1 lacks, of every subcommand's visible rows
  local s missing=""
  for s in $subs; do
    for f in $(RC_HELP_FORMAT=complete "$BIN" "$s" --help | awk '$2 != "hidden" {print $1}'); do
      grep -qF -- "$f" "$1" || missing+=" $s:$f"
    done
  done
  echo "$missing"
}
MAN=$P/share/man/man1/resumecheck.1
if [ "${RC_HAVE_MAN:-OFF}" != ON ]; then
  echo "SKIP (man page only): help2man was not found at configure time"
  [ ! -e "$MAN" ] || fail "a man page installed although help2man was not found"
else
  [ -f "$MAN" ] || fail "no $MAN"
  if command -v man >/dev/null; then
    MANWIDTH=200 man -l "$MAN" >"$T/man.txt" 2>"$T/man.err" || fail "man -l failed"
  elif command -v groff >/dev/null; then
    groff -man -Tutf8 "$MAN" >"$T/man.txt" 2>"$T/man.err" || fail "groff failed"
  else
    echo "SKIP (rendering only): neither man nor groff is installed"
    cp "$MAN" "$T/man.txt"
  fi
  if command -v groff >/dev/null; then
    groff -man -ww -z "$MAN" 2>"$T/groff.warn"
    [ ! -s "$T/groff.warn" ] || { fail "groff warns about the page"; cat "$T/groff.warn" >&2; }
  fi
  # man renders a hyphen as U+2010 in some locales: compare in ASCII
  sed 's/\xe2\x80\x90/-/g; s/\xe2\x88\x92/-/g' "$T/man.txt" | col -b >"$T/man.plain" 2>/dev/null ||
    cp "$T/man.txt" "$T/man.plain"
  grep -q "^NAME" "$T/man.plain" && grep -q "SUBCOMMANDS" "$T/man.plain" ||
    fail "man page lacks NAME or SUBCOMMANDS"
  missing=$(man_flags "$T/man.plain")
  [ -z "$missing" ] || fail "man page lacks flags:$missing"
  # control: the top-level --help alone does not name the subcommands' flags
  "$BIN" --help >"$T/top.txt"
  [ -n "$(man_flags "$T/top.txt")" ] || fail "control: the flag check passes on the top-level --help"
fi

# --- bash completion
COMP=$P/share/bash-completion/completions/resumecheck
[ -f "$COMP" ] || fail "no $COMP"
bash --norc --noprofile -c '
  source "$1" || exit 1
  complete -p resumecheck | grep -q -- "-F _resumecheck resumecheck" || { echo "complete -p: $(complete -p resumecheck 2>&1)"; exit 1; }
  c() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _resumecheck; echo "${COMPREPLY[*]}"; }
  c resumecheck ru
  c resumecheck run --prec
  c resumecheck run --precision ""
  c resumecheck run --progress ""
  c resumecheck run --precision = b
  c resumecheck train --first-microbatch-policy re
  c resumecheck bisect --git
  c resumecheck run --bogus
  c resumecheck run --stop
  c resumecheck bisect --prec
' _ "$COMP" >"$T/comp.txt" 2>&1 || { fail "completion script"; cat "$T/comp.txt" >&2; }
expect_line() { [ "$(sed -n "$1p" "$T/comp.txt")" = "$2" ] || fail "completion $3: '$(sed -n "$1p" "$T/comp.txt")', want '$2'"; }
expect_line 1 "run" "resumecheck ru"
expect_line 2 "--precision" "run --prec"
expect_line 3 "fp32 bf16 fp16 fp8" "run --precision <TAB>"
expect_line 4 "auto live plain off" "run --progress <TAB>"
expect_line 5 "bf16" "run --precision=b"
expect_line 6 "resolve" "train --first-microbatch-policy re"
expect_line 7 "--git-bisect" "bisect --git"
expect_line 8 "" "run --bogus (control: no such flag)"
expect_line 9 "" "run --stop (control: refused by run)"
expect_line 10 "" "bisect --prec (control: a flag of another subcommand)"

# --- the CUDA module's place
mkdir -p "$T/moved/bin" && cp "$BIN" "$T/moved/bin/resumecheck"
"$T/moved/bin/resumecheck" train --device cuda --steps 2 --out "$T/moved/leg" >"$T/moved.out" 2>&1
rc=$?
[ "$rc" = 125 ] || fail "moved binary, --device cuda: exit $rc, want 125"
if [ "${RC_HAVE_CUDA:-OFF}" = ON ]; then
  [ -f "$P/lib/resumecheck/libresumecheck_cuda.so" ] || fail "no lib/resumecheck/libresumecheck_cuda.so"
  grep -q "is not installed (looked in" "$T/moved.out" || fail "moved binary: $(cat "$T/moved.out")"
  "$BIN" train --device cuda --steps 2 --out "$T/cuda-leg" >"$T/cuda.out" 2>&1
  if grep -q "is not installed" "$T/cuda.out"; then fail "installed binary misses its module: $(cat "$T/cuda.out")"; fi
else
  [ ! -e "$P/lib/resumecheck" ] || fail "lib/resumecheck installed by a build without CUDA"
  grep -q "this build has no CUDA backend" "$T/moved.out" || fail "no-CUDA build: $(cat "$T/moved.out")"
fi

[ "$fails" = 0 ] && echo "install: all checks passed"
exit $((fails > 0))
