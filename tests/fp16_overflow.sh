#!/usr/bin/env bash
# fp16_overflow.sh OVERFLOW_FLAGS... -- NO_OVERFLOW_FLAGS...
# The catalogue's overflowing fp16 configuration really overflows: trained for
# 10 steps, its trace has at least two skipped steps before step N-1 and at
# least one overflow that the hysteresis absorbs (a skipped step after which
# the loss scale is not halved). Negative control: the same assertion on the
# flags after `--` (clean_fp16, whose scale never overflows) must fail.
set -u
: "${RC_BIN:?RC_BIN is not set}"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
over=() plain=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do over+=("$1"); shift; done
[ $# -gt 0 ] && shift
plain=("$@")
N=10

# overflows NAME FLAGS...: 0 when the trace shows >= 2 skipped steps before
# N-1 and an absorbed overflow; prints what it saw.
overflows() {
  local name=$1
  shift
  "$RC_BIN" train "$@" --steps $N --out "$t/$name" >"$t/$name.log" 2>&1 ||
    { echo "FAIL: train $* exited $?"; cat "$t/$name.log"; return 2; }
  # columns by name: step, loss_scale, skipped
  awk -F, -v n=$N '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { step = $col["step"]; scale[step] = $col["loss_scale"]; skip[step] = $col["skipped"] }
    END {
      nskip = 0; absorbed = 0
      for (s = 1; s <= n; s++) {
        if (skip[s] == 1 && s < n - 1) nskip++
        if (skip[s] == 1 && s < n && scale[s + 1] + 0 == scale[s] + 0) absorbed++
      }
      printf "skipped steps before N-1: %d, overflows absorbed by the hysteresis: %d\n", nskip, absorbed
      exit !(nskip >= 2 && absorbed >= 1)
    }' "$t/$name/trace.csv"
}

fail=0
overflows over "${over[@]}" || { echo "FAIL: ${over[*]} does not overflow as documented"; fail=1; }
if overflows plain "${plain[@]}"; then
  echo "FAIL: negative control: ${plain[*]} was taken for an overflowing config"
  fail=1
fi
exit $fail
