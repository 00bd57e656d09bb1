#!/usr/bin/env bash
# core_cli.sh — `resumecheck train` end to end on the CPU backend: the tiny
# preset learns, two processes write byte-identical traces, and bad flags
# exit 64 naming the problem.
set -u
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# 2. training learns: loss after 200 steps below 0.7x the first
"$RC_BIN" train --steps 200 --out "$t/learn" >/dev/null 2>&1 || bad "train 200 steps failed"
first=$(awk -F, 'NR==2{print $2}' "$t/learn/trace.csv")
last=$(awk -F, 'NR==201{print $2}' "$t/learn/trace.csv")
if awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < 0.7*a)}'; then ok "loss $first -> $last"; else bad "loss did not fall: $first -> $last"; fi

# 3. two processes, same config: byte-identical traces (and a control that differs)
"$RC_BIN" train --steps 10 --out "$t/a" 2>/dev/null && "$RC_BIN" train --steps 10 --out "$t/b" 2>/dev/null || bad "train failed"
cmp -s "$t/a/trace.csv" "$t/b/trace.csv" && ok "A/A traces identical" || bad "A/A traces differ"
"$RC_BIN" train --steps 10 --seed 7 --out "$t/c" 2>/dev/null
cmp -s "$t/a/trace.csv" "$t/c/trace.csv" && bad "a different seed gave the same trace" || ok "different seed, different trace"

# 7. bad flags and inconsistent configs: exit 64, message names the problem
expect64() {
  local want="$1"; shift
  out=$("$RC_BIN" train --out "$t/x" "$@" 2>&1); rc=$?
  if [ $rc -eq 64 ] && grep -q -- "$want" <<<"$out"; then ok "$* -> 64 ($want)"; else bad "$* -> rc $rc: $out"; fi
}
expect64 "--topk 5 exceeds --experts 4" --topk 5 --experts 4
expect64 "--mtp-repeated-layer needs --mtp-depths" --mtp-depths 0 --mtp-repeated-layer
expect64 "not divisible by --heads" --hidden 64 --heads 5
expect64 "must be even" --hidden 24 --heads 8
expect64 "needs a head dim" --attention-precision bf16 --hidden 40 --heads 4
expect64 "must be fp32 or bf16" --attention-precision fp8
expect64 "needs a head dim" --attention-precision bf16 --hidden 1024 --heads 4
expect64 "unknown flag '--bogus'" --bogus
expect64 "is not an integer" --steps ten
expect64 "is not one of" --precision fp12
expect64 "out of range" --dropout 2
expect64 "unknown bug" --inject no-such-bug
expect64 "beyond --steps" --steps 5 --stop-at 9
expect64 "needs --dropout" --inject rng-not-saved
[ -e "$t/x" ] && bad "a rejected command created its output directory" || ok "nothing written on usage errors"
"$RC_BIN" train --help | grep -q -- "--first-microbatch-policy" && ok "--help lists flags" || bad "--help"
exit $fail
