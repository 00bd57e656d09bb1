#!/usr/bin/env bash
# flags_megatron.sh — Megatron-LM's spellings of the core flags
# (docs/megatron-flags.md), as `train --dry-run` sees them:
#  - every alias in the config table gives the canonical config its flag
#    gives (the rows come from the hidden `train --list-flags`, so a new alias
#    is covered without editing this file); the control: the value chosen
#    changes the config, so an alias that were ignored would be caught;
#  - every flag of another shape (--bf16, --global-batch-size, ...) gives
#    the config of its native spelling, and has a case here (a new row
#    without one fails); the control: without it the config differs, or,
#    for flags accepted with one value only, another value is refused;
#  - a Megatron flag next to a native one that contradicts it is 64, the
#    pair in either order; its control, each alone, is 0;
#  - a typo near a Megatron name gets a "did you mean" naming it.
set -u
: "${RC_BIN:?}" "${RC_SRC:?}"
T=$(mktemp -d)
fails=0
trap 'rm -rf "$T"' EXIT
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# dry NAME ARGS...: `train --dry-run ARGS` into $T/NAME.out, its exit code into $T/NAME.rc
dry() {
  local name=$1
  shift
  timeout 60 "$RC_BIN" train --dry-run "$@" >"$T/$name.out" 2>&1
  echo $? >"$T/$name.rc"
}
rc_of() { cat "$T/$1.rc"; }
same() { [ "$(rc_of "$1")" = 0 ] && [ "$(rc_of "$2")" = 0 ] && cmp -s "$T/$1.out" "$T/$2.out"; }

"$RC_BIN" train --list-flags >"$T/rows" || fail "train --list-flags failed"
dry base
[ "$(rc_of base)" = 0 ] || fail "train --dry-run: $(cat "$T/base.out")"
cp "$T/base.out" "$T/base.json"
value_of() { # KEY: its value in the default canonical config
  sed -n "s/.*\"$1\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$T/base.json" | tr -d '"'
}

# ---- aliases: the same row under another name ----
n_alias=0
while IFS=$'\t' read -r group name aliases kind key choices; do
  [ "$group" = config ] && [ "$aliases" != - ] || continue
  d=$(value_of "$key")
  base=()
  case $kind in
  bool) # from a base where it is false, so that setting it shows
    sed "s/\"$key\":true/\"$key\":false/" "$T/base.json" >"$T/$key.json"
    base=(--config "$T/$key.json")
    v=() ;;
  int | int64 | uint64) v=($((d == 0 ? 1 : 2 * d))) ;;
  double) v=("$(awk -v d="$d" 'BEGIN { printf "%.17g", d == 0 ? 0.5 : d / 2 }')") ;;
  choice | string)
    v=()
    if [ "$choices" != - ]; then
      for c in ${choices//,/ }; do [ "$c" != "$d" ] && v=("$c") && break; done
    fi
    [ ${#v[@]} = 1 ] || { fail "$name: no test value for a $kind without choices" && continue; } ;;
  *) fail "$name: kind $kind has no test value here" && continue ;;
  esac
  dry "ctl_$key" "${base[@]}"
  dry "nat_$key" "${base[@]}" "$name" "${v[@]}"
  if [ "$(rc_of "nat_$key")" != 0 ] || same "nat_$key" "ctl_$key"; then
    fail "control: $name ${v[*]} did not change the config (exit $(rc_of "nat_$key")): $(head -2 "$T/nat_$key.out")"
    continue
  fi
  for a in $aliases; do
    n_alias=$((n_alias + 1))
    dry "al_$key" "${base[@]}" "$a" "${v[@]}"
    same "al_$key" "nat_$key" && ok "$a ${v[*]} = $name ${v[*]}" ||
      fail "$a ${v[*]} differs from $name ${v[*]}: $(head -2 "$T/al_$key.out")"
    if [ ${#v[@]} = 1 ]; then # the --flag=value form too
      dry "eq_$key" "${base[@]}" "$a=${v[0]}"
      same "eq_$key" "nat_$key" && ok "$a=${v[0]}" || fail "$a=${v[0]}: $(head -2 "$T/eq_$key.out")"
    fi
  done
done <"$T/rows"
[ "$n_alias" -ge 20 ] && ok "$n_alias aliases checked" || fail "only $n_alias aliases in the table"

# ---- flags of another shape: MEGATRON ARGS | NATIVE ARGS | CONTROL ----
# CONTROL: args whose config must differ from MEGATRON's, or "!ARGS" that
# must be refused (64): the flags accepted with one value only.
sed 's/"precision":"bf16"/"precision":"fp32"/' "$T/base.json" >"$T/fp32.json"
sed 's/"tie_embeddings":false/"tie_embeddings":true/' "$T/base.json" >"$T/tie.json"
sed 's/"data":""/"data":"corpus.txt"/' "$T/base.json" >"$T/data.json"
cat >"$T/shapes" <<EOF
--config $T/fp32.json --bf16|--config $T/fp32.json --precision bf16|--config $T/fp32.json
--fp16|--precision fp16|
--bf16 --fp8-format e4m3|--precision fp8|!--bf16 --fp8-format hybrid
--fp8-format e4m3 --bf16|--precision fp8|--bf16
--precision fp8 --fp8-recipe delayed|--precision fp8|!--precision fp8 --fp8-recipe tensorwise
--precision fp8 --fp8-amax-compute-algo max|--precision fp8|!--precision fp8 --fp8-amax-compute-algo most_recent
--micro-batch 2 --global-batch-size 8|--micro-batch 2 --microbatches 4|--micro-batch 2
--world-size 2 --micro-batch-size 2 --global-batch-size 12|--world-size 2 --micro-batch 2 --microbatches 3|--world-size 2 --micro-batch 2
--no-gradient-accumulation-fusion|--grad-accum-fusion off|
--config $T/tie.json --untie-embeddings-and-output-weights|--config $T/base.json|--config $T/tie.json
--lr-decay-style cosine||!--lr-decay-style linear
--lr-decay-iters 10 --train-iters 10|--steps 10|!--lr-decay-iters 9 --train-iters 10
--normalization RMSNorm||!--normalization LayerNorm
--position-embedding-type rope||!--position-embedding-type learned_absolute
--moe-layer-freq 1|--moe-layers 0,1|
--num-layers 4 --moe-layer-freq 2|--layers 4 --moe-layers 0,2|--layers 4
--moe-layer-freq [1,0]|--moe-layers 0|!--moe-layer-freq ([1]*2)
--config $T/data.json --mock-data|--config $T/base.json|--config $T/data.json
--moe-grouped-gemm||!--moe-grouped-gemm=1
--swiglu||!--swiglu=1
--disable-bias-linear||!--disable-bias-linear=1
--calculate-per-token-loss|--loss-type token-level --loss-normalize-at finish|
EOF
i=0
while IFS='|' read -r meg nat ctl; do
  i=$((i + 1))
  # shellcheck disable=SC2086 # the fields are word lists
  dry "m$i" $meg
  # shellcheck disable=SC2086
  dry "n$i" $nat
  same "m$i" "n$i" && ok "'$meg' = '$nat'" || fail "'$meg' (exit $(rc_of "m$i")) differs from '$nat': $(head -2 "$T/m$i.out")"
  if [ "${ctl:0:1}" = '!' ]; then
    # shellcheck disable=SC2086
    dry "c$i" ${ctl:1}
    [ "$(rc_of "c$i")" = 64 ] && ok "control: '${ctl:1}' refused" ||
      fail "control: '${ctl:1}' exit $(rc_of "c$i"), want 64: $(head -2 "$T/c$i.out")"
  else
    # shellcheck disable=SC2086
    dry "c$i" $ctl
    [ "$(rc_of "c$i")" = 0 ] && ! same "c$i" "m$i" && ok "control: '$ctl' differs" ||
      fail "control: '$ctl' (exit $(rc_of "c$i")) gives the config of '$meg'"
  fi
done <"$T/shapes"
# every row of the Megatron table has a case above
while IFS=$'\t' read -r group name _; do
  [ "$group" = megatron ] || continue
  grep -q -- "${name}\b" "$T/shapes" && ok "$name has a case" || fail "$name (a Megatron flag) has no case here"
done <"$T/rows"

# ---- docs/megatron-flags.md says what the tables have ----
doc="$RC_SRC/docs/megatron-flags.md"
sed -n '/^## The same setting under another name/,/^Spelt the same/p' "$doc" |
  sed -n 's/^| `\(--[a-z0-9-]*\)` | `\(--[a-z0-9-]*\)` |.*/\1 \2/p' | sort >"$T/doc_pairs"
awk -F'\t' '$1 == "config" && $3 != "-" { n = split($3, a, " "); for (i = 1; i <= n; i++) print a[i], $2 }' \
  "$T/rows" | sort >"$T/code_pairs"
if [ -s "$T/code_pairs" ] && cmp -s "$T/doc_pairs" "$T/code_pairs"; then
  ok "the doc's alias table is the code's ($(wc -l <"$T/code_pairs") rows)"
else
  fail "docs/megatron-flags.md's alias table differs from the code (< doc, > code): $(diff "$T/doc_pairs" "$T/code_pairs" | grep '^[<>]' | tr '\n' ' ')"
fi
head -n -1 "$T/code_pairs" >"$T/short_pairs" # control: a table missing a row is told apart
cmp -s "$T/doc_pairs" "$T/short_pairs" && fail "control: a shorter table compared equal" ||
  ok "control: a table without its last row differs"
while IFS=$'\t' read -r group name _; do
  [ "$group" = megatron ] || continue
  grep -qE -- "[\` ]${name}[\` ]" "$doc" && ok "$name is in the doc" || fail "$name is not in docs/megatron-flags.md"
done <"$T/rows"

# ---- contradictions: 64 in either order; each alone passes (above, or here) ----
refuse() { # WANT_TEXT ARGS...
  local want=$1
  shift
  dry r "$@"
  [ "$(rc_of r)" = 64 ] && grep -qF -- "$want" "$T/r.out" && ok "refused: $*" ||
    fail "$*: exit $(rc_of r), want 64 with '$want': $(head -2 "$T/r.out")"
}
refuse "contradict" --bf16 --precision fp32
refuse "contradict" --precision fp32 --bf16
refuse "contradict" --bf16 --precision bf16
refuse "contradict" --bf16 --fp16
refuse "contradict" --fp16 --fp8-format hybrid
refuse "needs --bf16" --fp8-format hybrid
refuse "use --fp8-format e4m3" --bf16 --fp8-format hybrid
refuse "not one of e4m3 | hybrid" --bf16 --fp8-format e5m2
refuse "not a multiple of --micro-batch 4" --global-batch-size 10 --micro-batch-size 4
refuse "not a multiple of --micro-batch 2 * --world-size 2" --world-size 2 --global-batch-size 6
refuse "contradict" --global-batch-size 8 --microbatches 2
refuse "contradict" --no-gradient-accumulation-fusion --grad-accum-fusion on
refuse "contradict" --untie-embeddings-and-output-weights --tie-embeddings
refuse "contradict" --moe-layer-freq 1 --moe-layers 1
refuse "3 entries for 2 layers" --moe-layer-freq [0,1,1]
refuse "contradict" --mock-data --data x
refuse "--steps given twice: give each flag once (--train-iters is --steps)" --steps 4 --train-iters 4
refuse "is not --steps 10" --lr-decay-iters 8
dry alone --fp16
[ "$(rc_of alone)" = 0 ] && ok "control: --fp16 alone" || fail "control: --fp16 alone: $(cat "$T/alone.out")"
dry alone --global-batch-size 12 --micro-batch-size 4
[ "$(rc_of alone)" = 0 ] && grep -q '"microbatches":3' "$T/alone.out" && ok "control: a divisible --global-batch-size" ||
  fail "control: --global-batch-size 12 --micro-batch-size 4: $(cat "$T/alone.out")"

# ---- did you mean: a typo near a Megatron name names it ----
refuse "did you mean --micro-batch-size?" --micro-batch-sise 3
refuse "did you mean --num-layers?" --num-layer 3
refuse "did you mean --no-gradient-accumulation-fusion?" --no-gradient-acumulation-fusion
dry far --frobnicate-the-batch 3
grep -q "did you mean" "$T/far.out" && fail "control: a name far from every flag got a suggestion" ||
  ok "control: no suggestion for --frobnicate-the-batch"

# `run` has --train-iters for --steps too, and forwards the others to its legs
if timeout 120 "$RC_BIN" run --train-iters 3 --save-at 1 --micro-batch-size 1 --global-batch-size 2 \
  --progress off --out "$T/run" >"$T/run.out" 2>&1; then
  grep -q '"microbatches":2' "$T/run/report.json" && grep -q '"micro_batch":1' "$T/run/report.json" &&
    ok "run --train-iters with Megatron batch flags" || fail "run: the config lacks the batch: $(grep -o '"micro[a-z_]*":[0-9]*' "$T/run/report.json")"
else
  fail "run --train-iters 3: $(tail -3 "$T/run.out")"
fi
timeout 60 "$RC_BIN" run --train-iters 3 --save-at 1 --confirm-arm --no-gradient-accumulation-fusion \
  --progress off --out "$T/run2" >"$T/run2.out" 2>&1
rc=$?
[ "$rc" = 64 ] && grep -q "confirm-arm sets --grad-accum-fusion" "$T/run2.out" && [ ! -e "$T/run2" ] &&
  ok "run --confirm-arm refuses --no-gradient-accumulation-fusion" || fail "run --confirm-arm --no-gradient-accumulation-fusion: exit $rc"
exit $((fails > 0))
