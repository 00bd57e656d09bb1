#!/usr/bin/env bash
# robust_alloc_limits.sh — `train` and `run` under an address-space limit
# (`ulimit -v`, RLIMIT_AS) or a data limit (`ulimit -d`, RLIMIT_DATA) too
# small for the config are refused before anything is allocated: exit 75, a
# message naming the limit ("RLIMIT_AS (ulimit -v)") and "nothing was
# allocated", no abort or core dump, and nothing left in --out (which did
# not exist: train removes the directory it made, run refuses before it
# makes one). Before the memory pre-check knew the process's limits, the
# CPU backend's allocator aborted (134, "out of memory allocating 65536
# bytes"). Negative controls: the same commands under a limit well above
# the plan exit 0 and leave a complete checkpoint.
#
# The limits come from the config's own plan (`train --dry-run-memory`):
# refused = half the per-process need plus 48 MiB (the program and its
# libraries map ~30 MiB before it plans), passed = four times the need plus
# 512 MiB. The config (--preset small) needs ~150 MiB, so the two are far
# apart wherever the libraries are somewhat bigger or smaller.
source "$(dirname "$0")/run_lib.sh"
need_train
if ldd "$RC_BIN" 2>/dev/null | grep -q 'lib[alt]san'; then
  echo "skip: a sanitizer build reserves more address space than any limit here"
  exit 77
fi

ARGS=(--preset small --steps 2 --save-at 1)
report=$("$RC_BIN" train "${ARGS[@]}" --dry-run-memory) || fail "train --dry-run-memory failed"
need=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["need_device_bytes"] + d["need_host_bytes"])' "$report")
[ "${need:-0}" -gt $((64 << 20)) ] 2>/dev/null || fail "a need of ${need:-?} bytes is too small to test with: $report"
small_kib=$((need / 2048 + 48 * 1024))
large_kib=$((need / 256 + 512 * 1024))
echo "need $need bytes; refused under $small_kib KiB, passed under $large_kib KiB"

# under KIND (v or d) of KIB: CMD... ; status in $rc, output in $T/$name.{out,err}
under() {
  local kind=$1 kib=$2 name=$3
  shift 3
  (ulimit -c 0; ulimit "-$kind" "$kib"; exec "$@") >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
}

# a refusal: 75, the limit named, nothing allocated, no abort, no --out
refused() {
  local name=$1 limit=$2 out=$3
  expect_rc 75 "$name under its limit" "$name"
  contains "$T/$name.err" "$limit"
  lacks "$T/$name.err" "Aborted"
  lacks "$T/$name.err" "out of memory allocating"
  [ -e "$out" ] && fail "$name: $out was left behind: $(ls -la "$out")"
  return 0
}

for kind in v d; do
  limit="RLIMIT_AS (ulimit -v)"
  [ "$kind" = d ] && limit="RLIMIT_DATA (ulimit -d)"
  under "$kind" "$small_kib" "train_$kind" "$RC_BIN" train "${ARGS[@]}" --out "$T/train_$kind"
  refused "train_$kind" "$limit" "$T/train_$kind"
  contains "$T/train_$kind.err" "nothing was allocated"
  under "$kind" "$small_kib" "run_$kind" "$RC_BIN" run "${ARGS[@]}" --out "$T/run_$kind" --progress off
  refused "run_$kind" "$limit" "$T/run_$kind"
  contains "$T/run_$kind.err" "not even --jobs 1 fits"

  # negative controls: a limit well above the plan trains, saves and verifies
  under "$kind" "$large_kib" "train_${kind}_ok" "$RC_BIN" train "${ARGS[@]}" --out "$T/train_${kind}_ok"
  expect_rc 0 "train under a limit above the plan (ulimit -$kind $large_kib)" "train_${kind}_ok"
  [ -f "$T/train_${kind}_ok/ckpt/iter_0000001/COMPLETE" ] || fail "train -$kind: no complete checkpoint"
  under "$kind" "$large_kib" "run_${kind}_ok" "$RC_BIN" run "${ARGS[@]}" --out "$T/run_${kind}_ok" --progress off
  expect_rc 0 "run under a limit above the plan (ulimit -$kind $large_kib)" "run_${kind}_ok"
done
finish
