#!/usr/bin/env bash
# flags_config.sh — `train --config FILE` and `run --config FILE`
# (docs/megatron-flags.md, "--config FILE"):
#  - round trip: `--dry-run` > FILE, then `--config FILE --dry-run` prints
#    the same bytes (defaults, and a config far from them); the control: a
#    file with one value changed prints another config;
#  - precedence: a flag overrides the file wherever it stands; a file's
#    keys override the defaults, the keys it leaves out keep them;
#  - each bad input is refused with its code, naming what is wrong: 66 for a
#    file that is missing, unreadable or not a regular file (a FIFO does not
#    hang), 64 for one that is not a config; each has a good twin (0);
#  - `run --config`: the legs' checkpoints carry the config hash that the
#    native flags give, and a bad file is refused before any leg starts.
set -u
: "${RC_BIN:?}"
T=$(mktemp -d)
fails=0
trap 'rm -rf "$T"' EXIT
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
dry() { # NAME ARGS...: `train --dry-run ARGS` into $T/NAME.out, its exit code into $T/NAME.rc
  local name=$1
  shift
  timeout 30 "$RC_BIN" train --dry-run "$@" >"$T/$name.out" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
}
rc_of() { cat "$T/$1.rc"; }

# ---- round trip ----
# shellcheck disable=SC2054 # 0,1 is one value
far=(--precision fp16 --seed 9223372036854775807 --micro-batch-size 3 --microbatches 5
  --moe-layers 0,1 --moe-scoring softmax --grad-accum-fusion off --mtp-separate-layers
  --inject hysteresis-not-saved --inject adam-step-from-iteration --lr 0.00123 --min-lr 1e-7
  --dropout 0.1 --data "$T/a \"quoted\" path" --first-microbatch-policy legacy)
for set in default far; do
  if [ $set = far ]; then dry $set "${far[@]}"; else dry $set; fi
  [ "$(rc_of $set)" = 0 ] || fail "$set: $(cat "$T/$set.err")"
  cp "$T/$set.out" "$T/$set.json"
  dry "rt_$set" --config "$T/$set.json"
  [ "$(rc_of "rt_$set")" = 0 ] && cmp -s "$T/rt_$set.out" "$T/$set.json" &&
    ok "round trip ($set): --config FILE --dry-run prints FILE" ||
    fail "round trip ($set): exit $(rc_of "rt_$set"): $(cat "$T/rt_$set.err") $(diff "$T/rt_$set.out" "$T/$set.json")"
done
sed 's/"lr":0.00123/"lr":0.00124/' "$T/far.json" >"$T/far2.json"
dry rt_far2 --config "$T/far2.json"
[ "$(rc_of rt_far2)" = 0 ] && ! cmp -s "$T/rt_far2.out" "$T/far.json" && grep -q '"lr":0.00124' "$T/rt_far2.out" &&
  ok "control: a file with another lr prints that lr" || fail "control: the file's lr was not applied"

# ---- precedence ----
for args in "--config $T/far.json --seed 5" "--seed 5 --config $T/far.json" "--config=$T/far.json --seed=5"; do
  # shellcheck disable=SC2086 # a word list
  dry prec $args
  grep -q '"seed":5,' "$T/prec.out" && grep -q '"precision":"fp16"' "$T/prec.out" &&
    ok "flag over file: $args" || fail "$args: $(cat "$T/prec.out" "$T/prec.err")"
done
grep -q '"seed":9223372036854775807,' "$T/rt_far.out" && ok "control: without --seed, the file's seed" ||
  fail "control: the file's seed was not kept"
echo '{"seed":77,"precision":"fp32"}' >"$T/part.json"
dry part --config "$T/part.json"
dry part_nat --seed 77 --precision fp32
[ "$(rc_of part)" = 0 ] && cmp -s "$T/part.out" "$T/part_nat.out" &&
  ok "a partial file: its keys, and the defaults for the rest" || fail "partial file: $(cat "$T/part.err")"
dry inj --config "$T/far.json" --inject loss-scaler-not-saved
grep -q '"inject":\["loss-scaler-not-saved","hysteresis-not-saved","adam-step-from-iteration"\]' "$T/inj.out" &&
  ok "--inject adds to the file's list" || fail "--inject with --config: $(cat "$T/inj.out" "$T/inj.err")"
dry mega --config "$T/part.json" --bf16 --global-batch-size 12
grep -q '"precision":"bf16"' "$T/mega.out" && grep -q '"microbatches":6' "$T/mega.out" &&
  ok "Megatron flags over the file" || fail "--bf16 --global-batch-size over --config: $(cat "$T/mega.err")"

# ---- bad input: CODE TEXT WHAT, then the file (or flags) ----
bad() { # WANT TEXT WHAT ARGS...
  local want=$1 text=$2 what=$3
  shift 3
  dry bad "$@"
  [ "$(rc_of bad)" = "$want" ] && grep -qF -- "$text" "$T/bad.err" && ok "$what -> $want" ||
    fail "$what: exit $(rc_of bad) (want $want with '$text'): $(head -2 "$T/bad.err")"
  [ -s "$T/bad.out" ] && fail "$what: printed a config anyway"
}
badfile() { # WANT TEXT WHAT CONTENT: a file holding CONTENT
  printf '%s' "$4" >"$T/b.json"
  bad "$1" "$2" "$3" --config "$T/b.json"
}
bad 66 "No such file" "a missing file" --config "$T/nope.json"
bad 66 "is a directory, not a regular file" "a directory" --config "$T"
mkfifo "$T/fifo"
bad 66 "is a FIFO, not a regular file" "a FIFO (no hang)" --config "$T/fifo"
if [ "$(id -u)" != 0 ]; then
  cp "$T/default.json" "$T/locked.json" && chmod 000 "$T/locked.json"
  bad 66 "Permission denied" "an unreadable file" --config "$T/locked.json"
else
  echo "skip: an unreadable file (running as root, which reads it anyway)"
fi
bad 64 "--config: empty path" "an empty path" --config ""
bad 64 "--config needs a value" "no path" --config
bad 64 "contradict" "--config with --preset" --config "$T/default.json" --preset small
bad 64 "--config given twice" "--config twice" --config "$T/default.json" --config "$T/default.json"
badfile 64 "not JSON" "an empty file" ""
badfile 64 "not JSON" "malformed JSON" '{"seed":1,'
badfile 64 "an array, not an object" "not an object" '[1,2]'
badfile 64 'unknown key "hiden"' "an unknown key" '{"hiden":64}'
badfile 64 'unknown key "preset"' "a flag that is no key" '{"preset":"tiny"}'
badfile 64 'duplicate key "seed"' "a repeated key" '{"seed":1,"seed":2}'
badfile 64 '"hidden" is a string, not an integer' "an int as a string" '{"hidden":"64"}'
badfile 64 '"hidden" is a number, not an integer' "a fractional int" '{"hidden":64.5}'
badfile 64 '"lr" is a string, not a number' "a double as a string" '{"lr":"0.1"}'
badfile 64 '"tie_embeddings" is a number, not a bool' "a bool as a number" '{"tie_embeddings":1}'
badfile 64 '"grad_accum_fusion" is a string, not a bool' "on/off as a string" '{"grad_accum_fusion":"on"}'
badfile 64 '"data" is null, not a string' "null" '{"data":null}'
badfile 64 "'fp64' is not one of" "an unknown choice" '{"precision":"fp64"}'
badfile 64 '"inject" is a string, not an array' "inject not an array" '{"inject":"rng-not-saved"}'
badfile 64 '"inject"[0] is a number' "an inject entry not a name" '{"inject":[3]}'
badfile 64 "unknown bug 'nope'" "an unknown bug" '{"inject":["nope"]}'
badfile 64 "3000000 is out of range" "out of range (int)" '{"hidden":3000000}'
badfile 64 "2 is out of range" "out of range (double)" '{"adam_beta1":2}'
badfile 64 "not a non-negative integer" "a negative seed" '{"seed":-1}'
badfile 64 "beyond what --config reads" "a seed past int64" '{"seed":18446744073709551615}'
badfile 64 "is not divisible by --heads" "a config that fails validation" '{"hidden":66,"heads":4}'
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$T/big.json"
bad 64 "more than the 1048576 a config may have" "a file over 1 MiB" --config "$T/big.json"
# the controls: the same kinds of value, well formed, are taken
badfile_ok() { # WHAT CONTENT GREP
  printf '%s' "$2" >"$T/g.json"
  dry good --config "$T/g.json"
  [ "$(rc_of good)" = 0 ] && grep -qF -- "$3" "$T/good.out" && ok "control: $1" ||
    fail "control: $1: exit $(rc_of good): $(cat "$T/good.err")"
}
badfile_ok "an int" '{"hidden":128}' '"hidden":128,'
badfile_ok "a double written as an integer" '{"lr":1}' '"lr":1,'
badfile_ok "bools" '{"tie_embeddings":true,"grad_accum_fusion":false}' '"grad_accum_fusion":false'
badfile_ok "a choice" '{"precision":"fp32"}' '"precision":"fp32"'
badfile_ok "an inject list" '{"inject":["rng-not-saved"],"dropout":0.1}' '"inject":["rng-not-saved"]'
badfile_ok "an empty object" '{}' '"hidden":64,'
badfile_ok "the largest seed it reads" '{"seed":9223372036854775807}' '"seed":9223372036854775807,'

# ---- run --config: the legs get the config the native flags give ----
cfg_hash() { "$RC_BIN" inspect "$(ls "$1"/*.h5 | head -1)" | sed -n 's/^ *config_sha256: //p'; }
run() { # NAME ARGS...
  local name=$1
  shift
  timeout 120 "$RC_BIN" run --steps 3 --save-at 1 --progress off --out "$T/$name" "$@" >"$T/$name.log" 2>&1
}
native=(--seed 21 --precision fp16 --micro-batch 1)
dry runcfg "${native[@]}"
cp "$T/runcfg.out" "$T/run.json"
if run rn "${native[@]}" && run rc --config "$T/run.json"; then
  hn=$(cfg_hash "$T/rn/through/ckpt/iter_0000003") hr=$(cfg_hash "$T/rc/resume@1/ckpt/iter_0000003")
  ht=$(cfg_hash "$T/rc/through/ckpt/iter_0000003") hs=$(cfg_hash "$T/rc/save/ckpt/iter_0000001")
  [ -n "$hn" ] && [ "$hn" = "$ht" ] && [ "$hn" = "$hr" ] && [ "$hn" = "$hs" ] &&
    ok "run --config: every leg's config hash is the native flags' ($hn)" ||
    fail "run --config: hashes native $hn, through $ht, save $hs, resume $hr"
  run rx --config "$T/run.json" --seed 22
  hx=$(cfg_hash "$T/rx/through/ckpt/iter_0000003")
  [ -n "$hx" ] && [ "$hx" != "$hn" ] && ok "control: --seed 22 over the file gives another hash" ||
    fail "control: --seed over --config did not change the hash ($hx)"
else
  fail "run with --config or native flags: $(tail -3 "$T/rn.log" "$T/rc.log")"
fi
run r66 --config "$T/nope.json"
rc=$?
[ "$rc" = 66 ] && [ ! -e "$T/r66" ] && ok "run --config missing -> 66, no leg" || fail "run --config missing: exit $rc"
printf '{"hiden":1}' >"$T/b.json"
run r64 --config "$T/b.json"
rc=$?
[ "$rc" = 64 ] && grep -q 'unknown key "hiden"' "$T/r64.log" && [ ! -e "$T/r64" ] &&
  ok "run --config with an unknown key -> 64, no leg" || fail "run --config bad: exit $rc: $(cat "$T/r64.log")"
exit $((fails > 0))
