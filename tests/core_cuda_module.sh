#!/usr/bin/env bash
# core_cuda_module.sh — the CUDA backend is a module opened on demand
# (src/backend/cuda_module.h): the executable links no CUDA library, and
# `--help`, `bugs`, `compare`, `inspect`, a CPU `train` and a CPU `run` (its
# leg processes included) load none at run time — read from the dynamic
# loader's own log (LD_DEBUG=libs, one file per process). `--device cuda`
# without a GPU or without the module exits 125 with one line saying which;
# `--device auto` falls back to the CPU with a note; an installed tree
# finds its module. Negative control: a `--device cuda` leg does open the
# module (when this build has one).
set -u
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_cuda_module.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
CUDA_LIBS='libcuda\.so|libcudart|libcublas|libnccl|libresumecheck_cuda'

# 1. nothing CUDA in the executable's own dependencies
if readelf -d "$RC_BIN" | grep -E "NEEDED" | grep -qE "$CUDA_LIBS"; then
  fail "the executable links a CUDA library: $(readelf -d "$RC_BIN" | grep NEEDED | grep -E "$CUDA_LIBS")"
fi

# loads NAME CMD...: run CMD with the loader's log in $T/ld/NAME.*; prints the CUDA objects it loaded
loads() {
  local name=$1
  shift
  mkdir -p "$T/ld"
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$T/ld/$name" "$@" >"$T/$name.out" 2>&1
  echo $? >"$T/$name.rc"
  cat "$T/ld/$name".* 2>/dev/null | grep -E "calling init: .*($CUDA_LIBS)" | sed 's/.*calling init: //' | sort -u
}
no_cuda() { # NAME CMD...
  local name=$1 got
  got=$(loads "$@")
  [ -z "$got" ] || fail "$name loaded CUDA libraries: $got"
  ls "$T/ld/$name".* >/dev/null 2>&1 || fail "$name: no loader log was written (LD_DEBUG ignored?)"
}

"$RC_BIN" train --steps 2 --save-at 2 --out "$T/leg" >/dev/null 2>&1 || fail "setup train leg"
shard=$(ls "$T"/leg/ckpt/iter_0000002/*.h5 | head -1)
no_cuda help "$RC_BIN" --help
no_cuda bugs "$RC_BIN" bugs
no_cuda inspect "$RC_BIN" inspect "$shard"
no_cuda compare "$RC_BIN" compare "$T/leg/ckpt/iter_0000002" "$T/leg/ckpt/iter_0000002"
no_cuda train "$RC_BIN" train --steps 2 --out "$T/cpu_train"
no_cuda run "$RC_BIN" run --steps 4 --save-at 2 --out "$T/cpu_run" --progress off
[ "$(cat "$T/run.rc")" = 0 ] || fail "the CPU run failed: $(tail -3 "$T/run.out")"
nproc_logs=$(ls "$T/ld/run".* | wc -l)
[ "$nproc_logs" -ge 4 ] || fail "the run's legs wrote no loader logs ($nproc_logs files): the check saw only the parent"

gpu=0
if [ -d /proc/driver/nvidia/gpus ] && [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then gpu=1; fi
[ -e /dev/nvidia0 ] && gpu=1
module=$(dirname "$RC_BIN")/libresumecheck_cuda.so

# 2. negative control: a CUDA leg opens the module (GPU or not)
if [ -f "$module" ]; then
  got=$(loads cuda_leg "$RC_BIN" train --device cuda --steps 2 --out "$T/cuda_leg")
  grep -q libresumecheck_cuda <<<"$got" || fail "a --device cuda leg did not open the module (the check above cannot see a load)"
fi

# 3. --device cuda without a GPU, and without the module
if [ "$gpu" = 0 ]; then
  "$RC_BIN" train --device cuda --steps 2 --out "$T/nogpu" >"$T/nogpu.out" 2>&1
  r=$?
  [ "$r" = 125 ] || fail "--device cuda without a GPU: exit $r, want 125"
  if [ -f "$module" ]; then
    grep -q "no usable CUDA device" "$T/nogpu.out" || fail "no GPU: message: $(cat "$T/nogpu.out")"
  fi
  [ "$(wc -l <"$T/nogpu.out")" = 1 ] || fail "no GPU: want one line, got: $(cat "$T/nogpu.out")"
  "$RC_BIN" train --device auto --steps 2 --out "$T/auto" >"$T/auto.out" 2>&1
  r=$?
  [ "$r" = 0 ] || fail "--device auto without a GPU: exit $r, want 0 (CPU fallback)"
  grep -q "note: --device auto: .*using the CPU backend" "$T/auto.out" || fail "auto: no fallback note"
  got=$(loads auto2 "$RC_BIN" train --device auto --steps 2 --out "$T/auto2")
  [ -z "$got" ] || fail "--device auto without a GPU loaded: $got"
fi
mkdir -p "$T/lone"
cp "$RC_BIN" "$T/lone/resumecheck"
env -u RC_CUDA_MODULE "$T/lone/resumecheck" train --device cuda --steps 2 --out "$T/nomod" >"$T/nomod.out" 2>&1
r=$?
[ "$r" = 125 ] || fail "--device cuda without the module: exit $r, want 125"
grep -qE "is not installed|has no CUDA backend" "$T/nomod.out" || fail "no module: message: $(cat "$T/nomod.out")"
RC_CUDA_MODULE="$T/no-such-module.so" "$RC_BIN" train --device cuda --steps 2 --out "$T/badmod" >"$T/badmod.out" 2>&1
r=$?
[ "$r" = 125 ] || fail "RC_CUDA_MODULE missing: exit $r, want 125"
if [ -f "$module" ]; then
  grep -q "cannot open the CUDA module" "$T/badmod.out" || fail "bad module path: $(cat "$T/badmod.out")"
fi
# 4. installed: the module goes to PREFIX/lib/resumecheck and the installed
# binary finds it there (no GPU: it then gets as far as looking for a device)
if [ -f "$module" ] && [ -f "$(dirname "$RC_BIN")/cmake_install.cmake" ] && command -v cmake >/dev/null 2>&1; then
  if cmake --install "$(dirname "$RC_BIN")" --prefix "$T/prefix" >"$T/install.out" 2>&1; then
    [ -x "$T/prefix/bin/resumecheck" ] || fail "install: no PREFIX/bin/resumecheck"
    [ -f "$T/prefix/lib/resumecheck/libresumecheck_cuda.so" ] || fail "install: no PREFIX/lib/resumecheck/libresumecheck_cuda.so"
    got=$(env -u RC_CUDA_MODULE LD_DEBUG=libs LD_DEBUG_OUTPUT="$T/ld/installed" \
      "$T/prefix/bin/resumecheck" train --device cuda --steps 2 --out "$T/installed" 2>&1)
    cat "$T/ld/installed".* | grep -q "calling init: $T/prefix/bin/../lib/resumecheck/libresumecheck_cuda.so" ||
      fail "the installed binary did not open the installed module: $got"
  else
    fail "cmake --install failed: $(tail -3 "$T/install.out")"
  fi
fi
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
