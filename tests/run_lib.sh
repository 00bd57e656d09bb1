# run_lib.sh — helpers sourced by the run_*.sh tests (not a test itself).
# Gives: $T (a scratch directory, removed when every check passed), the fake
# trainer's template, run_rc (runs `resumecheck run`, keeps stdout/stderr),
# assertions that count failures, and JSON/XML checks via python3 or
# xmllint when present.
set -u
: "${RC_BIN:?RC_BIN is not set}" "${RC_SRC:?RC_SRC is not set}"
FAKE="$RC_SRC/tests/trainers/fake_trainer.sh"
T=$(mktemp -d /tmp/rc_run_test.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# The fake trainer's template; extra trainer flags are appended.
tmpl() {
  printf "bash '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} %s" \
    "$FAKE" "$*"
}

# run_rc NAME ARGS...: `resumecheck run ARGS`, output in $T/NAME.out/.err, status in $rc.
run_rc() {
  local name=$1
  shift
  "$RC_BIN" run "$@" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
}

# expect_rc WANT WHAT NAME
expect_rc() {
  if [ "$rc" != "$1" ]; then
    fail "$2: exit $rc, want $1"
    sed 's/^/  out| /' "$T/$3.out" >&2
    sed 's/^/  err| /' "$T/$3.err" >&2
  fi
}

contains() { grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks: $2"; }
lacks() { if grep -qF -- "$2" "$1"; then fail "$(basename "$1") should not contain: $2"; fi; }

have_py() { command -v python3 >/dev/null 2>&1; }

# json_true FILE EXPR WHAT: EXPR (python, the document is d) must be true.
json_true() {
  have_py || return 0
  python3 - "$1" "$2" <<'PY' || fail "$3 ($2)"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

# xml_check FILE: 0 well-formed, 1 not, 2 no validator here.
xml_check() {
  if have_py; then
    python3 -c 'import sys,xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$1" 2>/dev/null
    return $(($? != 0))
  elif command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$1" 2>/dev/null
    return $(($? != 0))
  fi
  return 2
}

# xml_ok FILE WHAT: well-formed, and the validator rejects a broken copy.
xml_ok() {
  xml_check "$1"
  local r=$?
  if [ $r = 2 ]; then
    echo "note: no python3 or xmllint, $2 not validated"
    return 0
  fi
  [ $r = 0 ] || fail "$2 is not well-formed XML"
  sed '0,/<\/[a-z]*>/s/<\/[a-z]*>//' "$1" >"$T/broken.xml"
  xml_check "$T/broken.xml" && fail "the validator accepted a broken copy of $2 (negative control)"
  return 0
}

finish() {
  if [ "$fails" = 0 ]; then
    echo "ok"
    exit 0
  fi
  echo "$fails check(s) failed"
  exit 1
}

# Tests of the real core skip (77) while `train` cannot even validate flags.
need_train() {
  "$RC_BIN" train --steps 2 --dry-run >/dev/null 2>&1 || {
    echo "skip: resumecheck train is not available"
    exit 77
  }
}

# For the tests of an environment switch meant to change no bit
# (core_swiglu_recompute, core_model_params_copy).
# leg_digest NAME VAR=VALUE FLAGS...: a 3-step tiny train leg saving at step
# 3 under the assignment; prints the SHA-256 of its step-3 shards and its
# trace, nothing (and a message) if the leg fails.
leg_digest() {
  local name=$1 assign=$2
  shift 2
  env "$assign" "$RC_BIN" train --preset tiny --steps 3 --save-at 3 "$@" --out "$T/$name" \
    >"$T/$name.log" 2>&1 || { echo "leg $name failed: $(tail -1 "$T/$name.log")" >&2; return; }
  cat "$T/$name"/ckpt/iter_0000003/*.h5 "$T/$name/trace.csv" | sha256sum | cut -c1-64
}
# same_bytes_under VAR VALUE_A VALUE_B "name|flags" ...: each case's legs
# under VAR=VALUE_A and VAR=VALUE_B give the same bytes
same_bytes_under() {
  local var=$1 va=$2 vb=$3 c name a b
  local -a flags
  shift 3
  for c in "$@"; do
    name=${c%%|*}
    read -r -a flags <<<"${c#*|}"
    a=$(leg_digest "$name" "$var=$va" "${flags[@]}")
    b=$(leg_digest "${name}_b" "$var=$vb" "${flags[@]}")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$name: $var=$va gave ${a:-nothing}, $var=$vb ${b:-nothing}"
  done
}

# seed_changes_bytes VAR=VALUE FLAGS...: the negative control of such a test,
# the same leg with another seed gives other bytes
seed_changes_bytes() {
  local assign=$1 a b
  shift
  a=$(leg_digest seed_base "$assign" "$@")
  b=$(leg_digest seed_other "$assign" "$@" --seed 99)
  [ -n "$a" ] && [ "$a" != "$b" ] || fail "negative control: another seed gave the same bytes"
}

# flock(1) helpers of the lock tests (leg_step_lock, leg_start_gate).
# at_least A B: A is a number >= B
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; }
# ends_within S PID: PID has ended within S seconds
ends_within() {
  local i
  for ((i = 0; i < $1 * 10; i++)); do
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}
# held_within FILE -s|-x S: someone holds FILE so that a non-blocking lock
# of that kind fails, within S seconds
held_within() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    flock -n "$2" "$1" true 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}
# hold_lock FILE -s|-x S: a background process that holds FILE (shared or
# exclusive) for S seconds; $holder is its pid (the lock's only holder:
# killing it frees the lock and leaves nothing behind)
hold_lock() {
  (
    exec 9<>"$1"
    flock "$2" 9
    exec sleep "$3"
  ) </dev/null >/dev/null 2>&1 &
  holder=$!
}

# procs_in TEXT: pids of processes whose command line mentions TEXT.
procs_in() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case "$cmd" in *"$1"*) echo "${p#/proc/}" ;; esac
  done
}
# gone_within TEXT SECONDS: no process mentions TEXT within SECONDS.
gone_within() {
  local i
  for i in $(seq $(($2 * 10))); do
    [ -z "$(procs_in "$1")" ] && return 0
    sleep 0.1
  done
  return 1
}
