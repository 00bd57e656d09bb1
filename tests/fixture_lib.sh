# fixture_lib.sh — sourced by the tests that drive `resumecheck run` with
# hand-made checkpoints, traces and censuses (not a test itself): run_lib.sh,
# the Python package on PYTHONPATH (numpy and h5py are required, torch is
# not), and
#   fix_tmpl FIX          the exec template of tests/trainers/fixture_trainer.sh
#   ckpts LINE...         checkpoints through tests/census_fixture.py, a line each
#                         ("CKPT_ROOT STEP PATH=V[,V...] ...")
#   trace FILE ROW...     a trace.csv: header "step,loss,grad_norm", the rows given
#   census FILE LINE...   a census file; each LINE is FIELD|CLASS|VALUE[|NOTE]
#   json_check FILE CODE  python statements (asserts) on the document d
source "$(dirname "${BASH_SOURCE[0]}")/run_lib.sh"
PY="${RC_PYTHON:-python3}"
export PYTHONPATH="$RC_SRC/python${PYTHONPATH:+:$PYTHONPATH}"
for m in numpy h5py; do
  "$PY" -c "import $m" >/dev/null 2>&1 || {
    echo "FAIL: '$PY' cannot import $m: install it (.ci/run does; docs/pytorch.md)" >&2
    exit 1
  }
done
FIXTRAINER="$RC_SRC/tests/trainers/fixture_trainer.sh"

fix_tmpl() {
  printf "bash '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} --fixture '%s'" \
    "$FIXTRAINER" "$1"
}

ckpts() {
  printf '%s\n' "$@" >"$T/ckpts.spec"
  "$PY" "$RC_SRC/tests/census_fixture.py" "$T/ckpts.spec" || fail "could not write the checkpoints"
}

trace() {
  local f=$1
  shift
  mkdir -p "$(dirname "$f")"
  { echo "step,loss,grad_norm"; printf '%s\n' "$@"; } >"$f"
}

census() {
  local f=$1
  shift
  mkdir -p "$(dirname "$f")"
  { echo "# hand-made census"; printf '%s\n' "$@" | tr '|' '\t'; } >"$f"
}

json_check() {
  "$PY" - "$1" "$2" <<'PY' || fail "report check on $1"
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
}
