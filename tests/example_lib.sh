# example_lib.sh — sourced by the example_*.sh tests (not a test itself):
# py_lib.sh, plus the templates of the examples/ trainers, `run`s started in
# the background and waited for (several bug runs share the two cores: a
# leg spends most of its time importing torch), and report.json queries.
source "$(dirname "${BASH_SOURCE[0]}")/py_lib.sh"

# ex_tmpl SCRIPT RANKS [FLAGS...]: the exec template of examples/SCRIPT,
# under torchrun when RANKS > 1 (--standalone: a free port each, so legs and
# runs at the same time never collide).
ex_tmpl() {
  local script=$1 ranks=$2 launch
  shift 2
  if [ "$ranks" -gt 1 ]; then
    launch="'$PY' -m torch.distributed.run --standalone --nproc-per-node $ranks"
  else
    launch="'$PY'"
  fi
  printf "%s '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} %s" \
    "$launch" "$RC_SRC/examples/$script" "$*"
}

# start_run NAME ARGS...: `resumecheck run ARGS --out $T/NAME` in the
# background; its output in $T/NAME.out/.err, its status in $T/NAME.rc.
start_run() {
  local name=$1
  shift
  (
    "$RC_BIN" run "$@" --out "$T/$name" --progress off >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
  ) &
}

# expect_run NAME WANT WHAT: after `wait`, NAME's run exited WANT.
expect_run() {
  rc=$(cat "$T/$1.rc" 2>/dev/null || echo "none")
  expect_rc "$2" "$3" "$1"
}

# report_true NAME EXPR WHAT: EXPR (python) true of $T/NAME/report.json,
# with helpers: census(d) the census check's after-load differences,
# first_step(d) its first-step ones (each a list of field names, in order),
# state(d, leg) the diffs of the RESUME state check, trace(d) the resume
# trace check's trace object.
report_true() {
  "$PY" - "$T/$1/report.json" "$2" <<'PY' || fail "$1: $3 ($2)"
import json, sys
d = json.load(open(sys.argv[1]))
def check(kind, prefix):
    return next(c for c in d["checks"] if c["kind"] == kind and c["name"].startswith(prefix))
def census(d):
    return [x["field"] for x in check("census", "CENSUS")["census"]["differences"]]
def first_step(d):
    fs = check("census", "CENSUS")["census"]["first_step"]
    return None if fs is None else [x["field"] for x in fs["differences"]]
def state(d):
    return [x for x in check("state", "RESUME")["state"]["diffs"] if x["kind"] != "informational"]
def trace(d):
    return check("trace", "TRACE resume")["trace"]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

# census_value FILE FIELD: FIELD's value in a census file (empty if absent).
census_value() {
  awk -F '\t' -v f="$2" '$1 == f { print $3 }' "$1"
}
