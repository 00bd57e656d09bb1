# py_lib.sh — sourced by the py_*.sh tests (not a test itself): run_lib.sh,
# plus the Python interpreter CTest found ($RC_PYTHON), the package on
# PYTHONPATH, and the example trainer's template. torch, numpy and h5py are
# required: a missing one FAILS the test (exit 1), never skips it — CI
# installs them (.ci/run), and so must a developer (docs/pytorch.md).
source "$(dirname "${BASH_SOURCE[0]}")/run_lib.sh"
PY="${RC_PYTHON:-python3}"
export PYTHONPATH="$RC_SRC/python${PYTHONPATH:+:$PYTHONPATH}"
need_py_modules() { # MODULE...
  local m
  for m in "$@"; do
    "$PY" -c "import $m" >/dev/null 2>&1 || {
      echo "FAIL: '$PY' cannot import $m: install it (.ci/run does; docs/pytorch.md)" >&2
      exit 1
    }
  done
}
# The example trainer's template; extra trainer flags are appended.
py_tmpl() {
  printf "'%s' '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} %s" \
    "$PY" "$RC_SRC/examples/torch_train.py" "$*"
}
# census_diff A B: the fields two census files hold differently (or only
# one holds), one a line, in A's order then B's.
census_diff() {
  "$PY" - "$1" "$2" <<'PY'
import sys
def read(p):
    with open(p) as f:
        return dict(l.split("\t", 1) for l in f.read().splitlines() if l and not l.startswith("#"))
a, b = read(sys.argv[1]), read(sys.argv[2])
for k in list(a) + [k for k in b if k not in a]:
    if a.get(k) != b.get(k):
        print(k)
PY
}
