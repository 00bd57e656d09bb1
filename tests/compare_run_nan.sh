#!/usr/bin/env bash
# compare_run_nan.sh — `run` describes a differing dataset with the detail
# `compare` gives it: a resumed shard with NaN where the through leg has a
# number says "NaN on one side", not "max |a-b| 0". The exec trainer here
# writes test_compare's nan_one_side pair (a.h5 through, b.h5 resumed).
# Usage: compare_run_nan.sh PATH/TO/compare_unit (RC_BIN, RC_SRC from ctest).
# Control: the same trainer writing a.h5 on both legs passes.
source "$(dirname "$0")/run_lib.sh"
UNIT=${1:?usage: compare_run_nan.sh PATH/TO/compare_unit}
"$UNIT" --make-pairs "$T/pairs" >/dev/null || { fail "cannot make the pairs"; finish; }
cat >"$T/trainer.sh" <<'SH'
#!/usr/bin/env bash
# trainer.sh PAIR_DIR RESUMED_FILE --steps N --stop-at S --save-at LIST --resume-from=DIR --out DIR
set -eu
pairs=$1 resumed=$2; shift 2
stop="" saves="" resume="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stop-at) stop=$2; shift 2 ;;
    --save-at) saves=$2; shift 2 ;;
    --resume-from=*) resume=${1#*=}; shift ;;
    --out) out=$2; shift 2 ;;
    *) shift ;;
  esac
done
for s in ${saves//,/ }; do
  [ "$s" -le "$stop" ] || continue
  d=$out/ckpt/$(printf 'iter_%07d' "$s")
  mkdir -p "$d"
  if [ -n "$resume" ]; then cp "$pairs/$resumed" "$d/state.h5"; else cp "$pairs/a.h5" "$d/state.h5"; fi
  echo done >"$d/COMPLETE"
done
SH
cmd() {
  printf "bash '%s' '%s' %s --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out}" \
    "$T/trainer.sh" "$T/pairs/nan_one_side" "$1"
}
run_rc nan --trainer exec --train-cmd "$(cmd b.h5)" --steps 4 --save-at 2 --out "$T/nan" --progress off
expect_rc 1 "resumed shard with a NaN" nan
"$RC_BIN" compare "$T/pairs/nan_one_side/a.h5" "$T/pairs/nan_one_side/b.h5" --json "$T/cmp.json" >/dev/null
detail=$(python3 -c 'import json,sys; print([x for x in json.load(open(sys.argv[1]))["diffs"] if x["failing"]][0]["detail"])' "$T/cmp.json")
case "$detail" in *"NaN on one side"*) ;; *) fail "compare's detail lacks the NaN: $detail" ;; esac
contains "$T/nan.out" "$detail"
lacks "$T/nan.out" "max |a-b| 0,"
json_true "$T/nan/report.json" "any('$detail' in ((c.get('state') or {}).get('first_difference') or '') for c in d['checks'])" "report.json first_difference"

run_rc ok --trainer exec --train-cmd "$(cmd a.h5)" --steps 4 --save-at 2 --out "$T/ok" --progress off
expect_rc 0 "control: the same shard on both legs" ok
lacks "$T/ok.out" "NaN on one side"
finish
