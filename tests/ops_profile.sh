#!/usr/bin/env bash
# ops_profile.sh — RC_PROFILE=ops (src/backend/ops_profile.c) on the CPU
# backend: the profiled run writes the same trace and shards as a plain one
# (the wrapper only adds synchronisation), also when resuming; its stderr
# holds the op table and the GEMM shape table; a plain run prints no report.
# RC_PROFILE=events (timer marks instead of synchronisation) counts the same.
set -u
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
shard=shard_00000_of_00001.h5
same() { cmp -s "$1" "$2"; }

# (a) the profiler changes no result
"$RC_BIN" train --steps 4 --save-at 2,4 --out "$t/plain" 2>"$t/plain.err" || bad "plain train failed"
RC_PROFILE=ops "$RC_BIN" train --steps 4 --save-at 2,4 --out "$t/prof" 2>"$t/prof.err" ||
  bad "profiled train failed: $(tail -3 "$t/prof.err")"
for f in trace.csv ckpt/iter_0000002/$shard ckpt/iter_0000004/$shard ckpt/iter_0000004/manifest.json; do
  same "$t/plain/$f" "$t/prof/$f" && ok "$f identical" || bad "$f differs with RC_PROFILE=ops"
done
# the wrapper keeps the backend's name, which args.json records
grep -q '"device": *"cpu"' "$t/prof/ckpt/iter_0000004/args.json" && ok "args.json device is cpu" ||
  bad "args.json device: $(grep device "$t/prof/ckpt/iter_0000004/args.json")"

# a resumed leg, profiled, reproduces the plain train-through shard
RC_PROFILE=ops "$RC_BIN" train --steps 4 --resume-from "$t/plain/ckpt/iter_0000002" --save-at 4 \
  --out "$t/resume" 2>"$t/resume.err" || bad "profiled resume failed"
same "$t/plain/ckpt/iter_0000004/$shard" "$t/resume/ckpt/iter_0000004/$shard" &&
  ok "profiled resume: step-4 shard identical" || bad "profiled resume: step-4 shard differs"
grep -q "ops profile: 1 step(s) profiled, steps 4..4" "$t/resume.err" && ok "resume profiles step 4 only" ||
  bad "resume header: $(grep 'ops profile:' "$t/resume.err")"

# bf16 attention: the same bytes, and its own per-compute-type row
"$RC_BIN" train --steps 3 --attention-precision bf16 --out "$t/bf" 2>/dev/null &&
  RC_PROFILE=ops "$RC_BIN" train --steps 3 --attention-precision bf16 --out "$t/bfp" 2>"$t/bfp.err" ||
  bad "bf16 attention runs failed"
same "$t/bf/trace.csv" "$t/bfp/trace.csv" && ok "bf16 attention: traces identical" || bad "bf16 attention: traces differ"
grep -Eq '^    attention_backward\[bf16\] +[1-9]' "$t/bfp.err" && ok "attention_backward[bf16] row" ||
  bad "no attention_backward[bf16] row"

# (b) the report: a row per op with calls > 0, a shape row, totals
e="$t/prof.err"
grep -q "ops profile: 3 step(s) profiled, steps 2..4 (the leg's first step not counted)" "$e" &&
  ok "header: 3 steps profiled" || bad "header: $(grep 'ops profile:' "$e")"
calls() { awk -v op="$1" '$1 == op && $2 ~ /^[0-9]+$/ {print $2; exit}' "$e"; }
for op in gemm gemm_half gemm_to_half gemm_half_many cast_half attention_forward attention_backward "attention_forward[fp32]" \
  adamw_many rmsnorm_forward swiglu_backward cross_entropy fingerprint_many sumsq_many round_to to_host \
  total; do
  n=$(calls "$op")
  [ -n "$n" ] && [ "$n" -gt 0 ] && ok "$op: $n calls" || bad "no $op row with calls > 0"
done
grep -Eq '^  (fp32|bf16|fp16) [NT][NT] [0-9]+x[0-9]+x[0-9]+ beta(=0|!=0) +[1-9][0-9]* ' "$e" &&
  ok "a gemm shape row" || bad "no gemm shape row"
# the table covers the four (and gemm_e4m3, none here); gemm_half_many, a
# grouped linear's expert GEMMs, as one row of its own
g=$(($(calls gemm) + $(calls gemm_half) + $(calls gemm_to_half) + $(calls gemm_half_many)))
tg=$(awk '$1 == "total" && $2 == "gemm" {print $3}' "$e")
[ "$g" = "$tg" ] && ok "shape table total = gemm + gemm_half + gemm_to_half + gemm_half_many calls ($g)" ||
  bad "shape total $tg != gemm + gemm_half + gemm_to_half + gemm_half_many calls $g"
grep -Eq "^  grouped \(gemm_half_many\) +$(calls gemm_half_many) " "$e" &&
  ok "the grouped row has gemm_half_many's calls" || bad "no grouped row with gemm_half_many's calls"
grep -Eq '^  bf16 NT [0-9]+x[0-9]+x[0-9]+ beta=0 ->16 +[1-9]' "$e" && ok "a 16-bit output shape row" ||
  bad "no 16-bit output (->16) shape row"
grep -q "^profile (RC_PROFILE=ops" "$e" && ok "ops turns the phase profile on" || bad "no phase profile"

# (e) RC_PROFILE=events, the unsynchronised mode: the same bytes, the same
# calls op by op and shape by shape as the synchronised mode (every op is
# charged once its marks are read back, also the last ones, at the report),
# and a header that says how it timed; control: the synchronised header
# does not claim event timing
RC_PROFILE=events "$RC_BIN" train --steps 4 --save-at 2,4 --out "$t/ev" 2>"$t/ev.err" ||
  bad "events train failed: $(tail -3 "$t/ev.err")"
for f in trace.csv ckpt/iter_0000004/$shard; do
  same "$t/plain/$f" "$t/ev/$f" && ok "events: $f identical" || bad "events: $f differs"
done
table() { awk '$2 ~ /^[0-9]+$/ && NF >= 4 && $1 !~ /^profile/ {print $1, $2}' "$1" | sort; }
[ -n "$(table "$t/ev.err")" ] && [ "$(table "$t/ev.err")" = "$(table "$e")" ] &&
  ok "events: every op and shape row has the synchronised mode's calls" ||
  bad "events: calls differ: $(diff <(table "$t/ev.err") <(table "$e") | head -5)"
grep -q "^ops profile (event-timed" "$t/ev.err" && ok "events: header says event-timed" ||
  bad "events: header: $(grep '^ops profile (' "$t/ev.err")"
grep -q "^ops profile (event-timed" "$e" && bad "control: the synchronised header claims event timing" ||
  ok "control: the synchronised header does not claim event timing"
grep -q "^profile (RC_PROFILE=events" "$t/ev.err" && ok "events turns the phase profile on" ||
  bad "events: no phase profile"

# (c) negative controls: no report without RC_PROFILE, and none for RC_PROFILE=1
grep -q "ops profile" "$t/plain.err" && bad "a plain run printed an ops report" || ok "plain run: no report"
RC_PROFILE=1 "$RC_BIN" train --steps 3 --out "$t/one" 2>"$t/one.err" || bad "RC_PROFILE=1 train failed"
grep -q "^profile (RC_PROFILE=1" "$t/one.err" && ok "RC_PROFILE=1: phase profile" || bad "RC_PROFILE=1: no phase profile"
grep -q "ops profile" "$t/one.err" && bad "RC_PROFILE=1 printed an ops report" || ok "RC_PROFILE=1: no ops report"
# (d) the memory table (core/model_memory.c): the allocation record by kind
# and name; it follows the config (one dlogits buffer for the plain head,
# whose depths run one at a time; D + 1 for a TE-style head) and is
# printed only under RC_PROFILE (a vocabulary large enough that the heads'
# buffers pass the table's 1% floor at any depth)
mem() { grep '^profile: memory:' "$1"; }
row_count() { mem "$1" | awk -v n="$2" '$3 == n && $NF ~ /^buffers?$/ {print $(NF - 1); exit}'; }
kind_size() { mem "$1" | awk -v k="$2" '$3 == k && NF == 5 {print $4 $5; exit}'; }
mem "$t/one.err" | grep -Eq "the model's [1-9][0-9]* buffers, [0-9.]+ [KMG]iB of backend memory" &&
  ok "memory: header" || bad "memory: no header: $(mem "$t/one.err" | head -1)"
w=$(kind_size "$t/one.err" weights) g=$(kind_size "$t/one.err" main_grad)
[ -n "$w" ] && [ "$w" = "$g" ] && ok "memory: weights and main_grad both $w (fp32 per parameter)" ||
  bad "memory: weights '$w' against main_grad '$g'"
nw=$(row_count "$t/one.err" weight) ng=$(row_count "$t/one.err" main_grad)
ne=$(row_count "$t/one.err" exp_avg)
[ -n "$nw" ] && [ "$nw" = "$ng" ] && [ "$nw" = "$ne" ] &&
  ok "memory: one weight, main_grad and exp_avg buffer per parameter ($nw)" ||
  bad "memory: weight $nw, main_grad $ng, exp_avg $ne buffers"
for d in 1 3; do
  for head in plain te; do
    extra=() want=1
    [ $head = te ] && extra=(--te-output-head) want=$((d + 1))
    RC_PROFILE=1 "$RC_BIN" train --steps 2 --vocab 4096 --mtp-depths $d "${extra[@]}" \
      --out "$t/d$d$head" 2>"$t/d$d$head.err" || bad "--mtp-depths $d $head head failed"
    n=$(row_count "$t/d$d$head.err" dlogits_half)
    [ "$n" = $want ] && ok "memory: --mtp-depths $d, $head head: $n dlogits buffers" ||
      bad "memory: --mtp-depths $d, $head head: '$n' dlogits buffers, want $want"
  done
done
mem "$t/plain.err" | grep -q . && bad "a plain run printed the memory table" ||
  ok "plain run: no memory table"
exit $fail
