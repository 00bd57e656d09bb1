# bisect_lib.sh — helpers sourced by the bisect_*.sh tests (not a test itself).
# Gives $T (scratch, removed when every check passed), fail/finish counting,
# mkrun (a `resumecheck run` of 10 steps saved at 5) and jq_true (a Python
# expression over the bisect JSON; without python3 the JSON checks are
# skipped and the text checks still run).
set -u
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_bisect_test.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# mkrun NAME WANT_RC FLAGS...: the run the bisect reads, in $T/NAME.
mkrun() {
  local name=$1 want=$2
  shift 2
  "$RC_BIN" run "$@" --steps 10 --save-at 5 --out "$T/$name" --progress off >"$T/$name.run.out" 2>&1
  local r=$?
  if [ "$r" != "$want" ]; then
    fail "run $name: exit $r, want $want"
    cat "$T/$name.run.out" >&2
  fi
}

# bisect NAME [FLAGS...]: bisect $T/NAME, text in $T/NAME.txt, JSON in $T/NAME.json, status in $rc.
bisect() {
  local name=$1
  shift
  "$RC_BIN" bisect "$T/$name" --json "$T/$name.json" "$@" >"$T/$name.txt" 2>&1
  rc=$?
}

expect_rc() {
  if [ "$rc" != "$1" ]; then
    fail "$2: exit $rc, want $1"
    sed 's/^/  | /' "$T/$3.txt" >&2
  fi
}

contains() { grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks: $2"; }
lacks() { if grep -qF -- "$2" "$1"; then fail "$(basename "$1") should not contain: $2"; fi; }

# jq_true FILE EXPR WHAT: EXPR (python; the document is d, the first event's
# two sides are t and r, or None) must be true.
jq_true() {
  command -v python3 >/dev/null 2>&1 || return 0
  python3 - "$1" "$2" <<'PY' || fail "$3 ($2)"
import json, sys
d = json.load(open(sys.argv[1]))
fe = d.get("first_event") or {}
t, r = fe.get("through"), fe.get("resume")
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

finish() {
  if [ "$fails" = 0 ]; then
    echo "ok"
    exit 0
  fi
  echo "$fails check(s) failed"
  exit 1
}
