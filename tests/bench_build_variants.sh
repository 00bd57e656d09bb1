#!/usr/bin/env bash
# bench_build_variants.sh — bench/build_variants.sh rebuilds one kernel file
# of this build's CUDA module with other tuning constants and relinks the
# module: a variant of cuda_elementwise.cu with SWIGLU_THREADS=512 and a
# macro whose value holds a comma (what --pre-include carries and nvcc's -D
# would split) links into a module other than the build's, with the module's
# entry point, and packed (RC_VARIANT_PACK=1) gunzips to an ELF shared
# object. Negative control: a variant whose macro does not compile fails
# the script (non-zero, named) and leaves no module. No GPU needed; skips
# without the CUDA module.
set -u
: "${RC_SRC:?}" "${RC_BUILD_DIR:?}"
case "${RC_HAVE_CUDA:-}" in 1 | ON | TRUE | true) ;; *) echo "skip: no CUDA module in this build"; exit 77 ;; esac
MOD="$RC_BUILD_DIR/libresumecheck_cuda.so"
[ -f "$MOD" ] && [ -f "$RC_BUILD_DIR/compile_commands.json" ] || {
  echo "skip: $MOD or compile_commands.json is missing"
  exit 77
}
T=$(mktemp -d /tmp/rc_variants_test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
cd "$RC_SRC" || exit 1
printf '%s\n' "# a comment, then one variant" \
  "sw512 kernels/cuda_elementwise.cu SWIGLU_THREADS=512 RC_TEST_PAIR=1,2" >"$T/good.spec"
RC_VARIANT_JOBS=1 bash bench/build_variants.sh "$RC_BUILD_DIR" "$T/good.spec" "$T/out" >"$T/good.log" 2>&1 ||
  fail "the variant build failed: $(tail -3 "$T/good.log")"
if [ -f "$T/out/sw512.so" ]; then
  cmp -s "$T/out/sw512.so" "$MOD" && fail "the variant module is the build's, byte for byte"
  nm -D --defined-only "$T/out/sw512.so" | grep -q " rc_cuda_module_entry$" ||
    fail "the variant module lacks rc_cuda_module_entry"
  grep -qx "#define RC_TEST_PAIR 1,2" "$T/out/sw512.h" || fail "the comma value did not reach the header"
else
  fail "no sw512.so"
fi
RC_VARIANT_PACK=1 RC_VARIANT_JOBS=1 bash bench/build_variants.sh "$RC_BUILD_DIR" "$T/good.spec" \
  "$T/packed" >"$T/packed.log" 2>&1 || fail "the packed build failed: $(tail -3 "$T/packed.log")"
[ -f "$T/packed/sw512.so.gz" ] && [ ! -e "$T/packed/sw512.so" ] &&
  gzip -dc "$T/packed/sw512.so.gz" | head -c 4 | grep -q "ELF" || fail "no packed ELF module"
# negative control: a macro that breaks the file
printf '%s\n' "bad kernels/cuda_elementwise.cu SWIGLU_THREADS=(" >"$T/bad.spec"
if RC_VARIANT_JOBS=1 bash bench/build_variants.sh "$RC_BUILD_DIR" "$T/bad.spec" "$T/bad" >"$T/bad.log" 2>&1; then
  fail "negative control: a variant that cannot compile succeeded"
fi
grep -q "variant bad: FAILED" "$T/bad.log" || fail "the failure does not name the variant: $(tail -2 "$T/bad.log")"
[ ! -e "$T/bad/bad.so" ] || fail "a failed variant left a module"
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
