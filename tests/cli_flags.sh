#!/usr/bin/env bash
# cli_flags.sh — the one flag facility (src/base/flags.h) as every subcommand
# sees it: --version prints the version the reports carry; an unknown flag
# and a repeated one are 64 naming the flag (with a "did you mean" for a
# typo); `--flag=value` means what `--flag value` means, down to the
# canonical config; `--` makes a following `--x` a positional; `run`
# forwards a core flag's `--flag=value` form to its legs verbatim.
# Each check has a twin that must come out the other way (the control).
set -u
: "${RC_BIN:?}" "${RC_SRC:?}"
T=$(mktemp -d)
fails=0
trap 'rm -rf "$T"' EXIT
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() { # WANT_RC GREP WHAT CMD...: CMD exits WANT_RC and its output holds GREP
  local want=$1 pat=$2 what=$3
  shift 3
  timeout 60 "$@" >"$T/out" 2>&1
  local rc=$?
  if [ "$rc" = "$want" ] && grep -qF -- "$pat" "$T/out"; then ok "$what -> $rc"; else
    fail "$what: exit $rc (want $want, output with '$pat'): $(head -3 "$T/out")"
  fi
}

# --version: every subcommand prints RC_VERSION, the version report.json carries
V=$(sed -n 's/^#define RC_VERSION "\(.*\)"$/\1/p' "$RC_SRC/harness/report.h")
[ -n "$V" ] || fail "no RC_VERSION in harness/report.h"
for sub in train run compare bisect inspect bugs; do
  expect 0 "resumecheck $V" "$sub --version" "$RC_BIN" "$sub" --version
done
expect 0 "resumecheck $V" "--version alone" "$RC_BIN" --version
# control: after `--` it is an argument, not a request (compare gets a third path)
expect 64 "expected two paths" "compare A B -- --version" "$RC_BIN" compare a b -- --version

# unknown flags: 64 on every subcommand, a typo gets the nearest name
for sub in train compare bisect inspect bugs; do
  expect 64 "unknown flag '--frobnicate'" "$sub --frobnicate" "$RC_BIN" "$sub" --frobnicate
done
# run forwards flags it does not own; the legs' `train --dry-run` refuses them
expect 64 "unknown flag '--frobnicate'" "run --frobnicate" \
  "$RC_BIN" run --steps 2 --save-at 1 --progress off --out "$T/fr" --frobnicate
expect 64 "did you mean --steps?" "train --stpes 3" "$RC_BIN" train --stpes 3 --dry-run
expect 64 "did you mean --ignore?" "compare --ignroe" "$RC_BIN" compare a b --ignroe x
grep -q "did you mean" <(timeout 60 "$RC_BIN" train --frobnicate 2>&1) &&
  fail "control: a name far from every flag got a suggestion" || ok "control: no suggestion for --frobnicate"

# duplicates: 64 naming the flag, whatever the spelling of each; repeatable ones pass
expect 64 "--seed given twice" "train --seed 1 --seed=2" "$RC_BIN" train --seed 1 --seed=2 --dry-run
expect 64 "--max-lines given twice" "compare --max-lines 1 --max-lines=2" \
  "$RC_BIN" compare a b --max-lines 1 --max-lines=2
expect 64 "--jobs given twice" "run --jobs=2 --jobs 3" "$RC_BIN" run --jobs=2 --jobs 3 --steps 4 --save-at 2 --out "$T/dup"
expect 0 '"inject":["rng-not-saved","save-draws-rng"]' "control: --inject twice" \
  "$RC_BIN" train --inject rng-not-saved --inject=save-draws-rng --dropout 0.1 --dry-run
[ ! -e "$T/dup" ] || fail "a refused run created its --out"

# --flag=value is --flag value, down to the canonical config (and its hash)
"$RC_BIN" train --dry-run --seed=7 --precision=fp16 --moe-layers=0,1 --grad-accum-fusion=off >"$T/eq" 2>&1
"$RC_BIN" train --dry-run --seed 7 --precision fp16 --moe-layers 0,1 --grad-accum-fusion off >"$T/sp" 2>&1
if cmp -s "$T/eq" "$T/sp" && grep -q '"seed":7' "$T/eq"; then ok "--flag=value canonical config = --flag value"; else
  fail "--flag=value differs from --flag value: $(cat "$T/eq" "$T/sp")"
fi
"$RC_BIN" train --dry-run --seed=8 --precision=fp16 --moe-layers=0,1 --grad-accum-fusion=off >"$T/ne" 2>&1
cmp -s "$T/eq" "$T/ne" && fail "control: another --seed= gave the same config" || ok "control: --seed=8 differs"
expect 64 "--dry-run takes no value" "train --dry-run=1" "$RC_BIN" train --dry-run=1
expect 64 "--seed needs a value" "train --seed at the end" "$RC_BIN" train --dry-run --seed

# `--` ends the flags: a following --x is a positional (compare: a missing path, 66)
expect 66 "No such file" "compare A -- --x" "$RC_BIN" compare "$T/nope" -- --x
expect 64 "unknown flag '--x'" "control: compare A --x" "$RC_BIN" compare "$T/nope" --x
expect 64 "unexpected argument '--steps'" "train -- --steps 3" "$RC_BIN" train --dry-run -- --steps 3

# run forwards core flags verbatim, --flag=value included: the legs' args.json
# has the token and their checkpoints the setting
if timeout 120 "$RC_BIN" run --steps 2 --save-at 1 --seed=7 --progress off --out "$T/run" >"$T/run.out" 2>&1; then
  grep -q '"--seed=7"' "$T/run/through/ckpt/iter_0000002/args.json" &&
    grep -q '"--seed=7"' "$T/run/resume@1/ckpt/iter_0000002/args.json" &&
    ok "run forwarded --seed=7 to its legs" || fail "run did not forward --seed=7: $(cat "$T/run/through/ckpt/iter_0000002/args.json")"
  shard=$(ls "$T/run/through/ckpt/iter_0000002/"*.h5 | head -1)
  "$RC_BIN" inspect "$shard" | grep -q '\\"seed\\":7\|"seed":7' && ok "the legs trained with seed 7" ||
    fail "the through leg's config does not hold seed 7: $("$RC_BIN" inspect "$shard" | grep -i seed | head -2)"
else
  fail "run --seed=7: $(tail -5 "$T/run.out")"
fi
expect 64 "--seed" "control: run --seed=x is refused by the legs' dry run" \
  "$RC_BIN" run --steps 2 --save-at 1 --seed=x --progress off --out "$T/runx"
exit $((fails > 0))
