#!/usr/bin/env bash
# core_kernel_switches.sh — an environment switch that selects another
# kernel (RC_CUDA_ATTENTION=simple, docs/cuda-backend.md) is recorded in the
# checkpoint's args.json as "kernel_switches" and noted on the leg's stderr,
# whatever the backend: a CPU leg ignores it (its shards and trace are the
# bytes of a leg without it) but the record says what was set. `run` records
# it in report.json ("kernel_switches") and says so in its text report.
# Every switch in the list is recorded. Negative controls: a leg and a run
# without the switch record an empty object and note nothing.
set -u
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_kernel_switches.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
leg() { # NAME ENV...: a tiny CPU leg saving at step 2
  local name=$1
  shift
  env -u RC_CUDA_ATTENTION "$@" "$RC_BIN" train --preset tiny --device cpu --steps 2 --save-at 2 \
    --out "$T/$name" >/dev/null 2>"$T/$name.err" || fail "leg $name failed: $(tail -1 "$T/$name.err")"
}
bytes() { cat "$T/$1"/ckpt/iter_0000002/*.h5 "$T/$1/trace.csv" | sha256sum | cut -c1-64; }

leg set RC_CUDA_ATTENTION=simple
leg unset
args_set="$T/set/ckpt/iter_0000002/args.json"
args_unset="$T/unset/ckpt/iter_0000002/args.json"

# the switch set: recorded with its value, and noted
tr -d ' \n' <"$args_set" | grep -q '"kernel_switches":{"RC_CUDA_ATTENTION":"simple"}' ||
  fail "args.json of the leg with RC_CUDA_ATTENTION=simple does not record it: $(grep -A2 kernel_switches "$args_set")"
grep -q '^note: kernel switch RC_CUDA_ATTENTION=simple is set' "$T/set.err" ||
  fail "no note of the switch on the leg's stderr"
# negative control: not set, an empty record and no note
tr -d ' \n' <"$args_unset" | grep -q '"kernel_switches":{}' ||
  fail "args.json of the leg without the switch: $(grep -A2 kernel_switches "$args_unset")"
grep -q 'kernel switch' "$T/unset.err" && fail "a note of a switch that was not set"
# the CPU backend does not read it: the same bytes either way
[ "$(bytes set)" = "$(bytes unset)" ] || fail "RC_CUDA_ATTENTION changed the CPU leg's bytes"

# every switch of src/base/kernel_switches.h is recorded, not only the first
# (one was once described there but missing from the list): the names read
# from the list itself, each set to a value of its own
: "${RC_SRC:?RC_SRC is not set}"
switches=$(sed -n '/RC_KERNEL_SWITCHES\[\]/,/;/p' "$RC_SRC/src/base/kernel_switches.h" |
  grep -o '"RC_[A-Z0-9_]*"' | tr -d '"')
[ "$(echo "$switches" | wc -w)" -ge 2 ] || fail "read $(echo "$switches" | wc -w) switches from the list"
settings=()
for name in $switches; do settings+=("$name=probe_$name"); done
leg all "${settings[@]}"
for sw in "${settings[@]}"; do
  tr -d ' \n' <"$T/all/ckpt/iter_0000002/args.json" | grep -q "\"${sw%%=*}\":\"${sw#*=}\"" ||
    fail "args.json of a leg with $sw does not record it"
done

# run: report.json and the text report
run() { # NAME ENV...
  local name=$1
  shift
  env -u RC_CUDA_ATTENTION "$@" "$RC_BIN" run --steps 2 --save-at 1 --out "$T/run_$name" \
    >"$T/run_$name.out" 2>&1 || fail "run $name failed: $(tail -2 "$T/run_$name.out")"
}
run set RC_CUDA_ATTENTION=simple
run unset
tr -d ' \n' <"$T/run_set/report.json" | grep -q '"kernel_switches":{"RC_CUDA_ATTENTION":"simple"}' ||
  fail "report.json of a run with RC_CUDA_ATTENTION=simple does not record it"
grep -q '^kernel switch RC_CUDA_ATTENTION=simple set' "$T/run_set.out" ||
  fail "the text report does not say RC_CUDA_ATTENTION=simple is set"
tr -d ' \n' <"$T/run_unset/report.json" | grep -q '"kernel_switches":{}' ||
  fail "report.json of a run without the switch: $(grep -A2 kernel_switches "$T/run_unset/report.json")"
grep -q '^kernel switch' "$T/run_unset.out" && fail "the text report names a switch that was not set"

[ $fails -eq 0 ] || exit 1
echo "ok: RC_CUDA_ATTENTION=simple recorded in args.json, report.json and the reports; unset: {} and no note; CPU bytes equal"
