#!/usr/bin/env bash
# noise_cpu_switch.sh — RC_CPU_SUM_ORDER=shuffled, the kernel switch that
# makes the CPU core not bitwise deterministic on purpose (the embedding
# backward adds its tokens in an order drawn per process,
# src/backend/cpu/cpu_sum_order.c): two legs under it write different bytes
# (a trace column and the shard) although every flag is the same; it is
# recorded in args.json and noted as read by the cpu backend; `run` records
# it in report.json and its text report, and judged byte for byte such a
# run fails A/A (exit 2). Negative controls: unset, or set to "fixed", two
# legs write the same bytes, and the same bytes as each other.
source "$(dirname "$0")/run_lib.sh"
need_train
leg() { # NAME VALUE|-: a tiny 3-step CPU leg saving at 3
  local name=$1 v=$2
  if [ "$v" = - ]; then
    env -u RC_CPU_SUM_ORDER "$RC_BIN" train --preset tiny --steps 3 --save-at 3 --out "$T/$name" \
      >/dev/null 2>"$T/$name.err" || fail "leg $name failed: $(tail -1 "$T/$name.err")"
  else
    RC_CPU_SUM_ORDER=$v "$RC_BIN" train --preset tiny --steps 3 --save-at 3 --out "$T/$name" \
      >/dev/null 2>"$T/$name.err" || fail "leg $name failed: $(tail -1 "$T/$name.err")"
  fi
}
bytes() { cat "$T/$1"/ckpt/iter_0000003/*.h5 "$T/$1/trace.csv" | sha256sum | cut -c1-64; }
leg s1 shuffled
leg s2 shuffled
leg u1 -
leg u2 -
leg f1 fixed
[ "$(bytes s1)" != "$(bytes s2)" ] || fail "two legs under RC_CPU_SUM_ORDER=shuffled wrote the same bytes"
cmp -s "$T/s1/trace.csv" "$T/s2/trace.csv" && fail "their traces are the same"
# controls: the order ops.h defines, whether unset or "fixed"
[ "$(bytes u1)" = "$(bytes u2)" ] || fail "two legs without the switch differ"
[ "$(bytes u1)" = "$(bytes f1)" ] || fail "RC_CPU_SUM_ORDER=fixed changed the bytes"
# recorded, and noted as read by the cpu backend
tr -d ' \n' <"$T/s1/ckpt/iter_0000003/args.json" | grep -q '"kernel_switches":{"RC_CPU_SUM_ORDER":"shuffled"}' ||
  fail "args.json does not record RC_CPU_SUM_ORDER=shuffled"
contains "$T/s1.err" "note: kernel switch RC_CPU_SUM_ORDER=shuffled is set (recorded in args.json)"
lacks "$T/s1.err" "backend does not read it"
tr -d ' \n' <"$T/u1/ckpt/iter_0000003/args.json" | grep -q '"kernel_switches":{}' ||
  fail "args.json of a leg without the switch records one"

# run, byte for byte: A/A fails; report.json and the text say the switch was set
RC_CPU_SUM_ORDER=shuffled "$RC_BIN" run --steps 4 --save-at 2 --aa --out "$T/run" --jobs 2 \
  --progress off >"$T/run.out" 2>"$T/run.err"
rc=$?
[ $rc = 2 ] || fail "run under the switch, --noise bytes: exit $rc, want 2 (A/A failed)"
contains "$T/run.out" "kernel switch RC_CPU_SUM_ORDER=shuffled set: it changes a CPU leg's bits"
json_true "$T/run/report.json" "d['kernel_switches'] == {'RC_CPU_SUM_ORDER': 'shuffled'}" \
  "report.json records the switch"
json_true "$T/run/report.json" "d['verdict'] == 'aa-failed' and d['config']['noise'] == 'bytes'" \
  "the bytes verdict is aa-failed"
# control: the same run without it is identical
env -u RC_CPU_SUM_ORDER "$RC_BIN" run --steps 4 --save-at 2 --aa --out "$T/run0" --jobs 2 \
  --progress off >"$T/run0.out" 2>"$T/run0.err"
rc=$?
[ $rc = 0 ] || fail "the same run without the switch: exit $rc, want 0"
finish
