#!/usr/bin/env bash
# io_valgrind.sh — no uninitialised byte reaches a shard: the save (which
# writes the HDF5 image with write(2)) and the load run clean under
# valgrind's memcheck, with a group large enough to split B-tree nodes.
# Negative control: a state whose tensor buffer was never initialised must
# make valgrind fail, proving the check can see such bytes. Skips (77)
# without valgrind, and in AddressSanitizer builds.
set -uo pipefail
: "${IO_TEST_BIN:?}"
command -v valgrind >/dev/null || { echo "valgrind not installed: skipping"; exit 77; }
if ldd "$IO_TEST_BIN" 2>/dev/null | grep libasan >/dev/null; then  # no -q: with pipefail, an early exit would SIGPIPE ldd
  echo "AddressSanitizer build (RC_SANITIZE): valgrind cannot run it; skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vg() { valgrind -q --error-exitcode=99 --exit-on-first-error=no "$@"; }
vg "$IO_TEST_BIN" save "$tmp/a" experts 120 world 2 || { echo "FAIL: save under valgrind"; exit 1; }
vg "$IO_TEST_BIN" save "$tmp/b" experts 3 || { echo "FAIL: save under valgrind"; exit 1; }
vg "$IO_TEST_BIN" load "$tmp/b/iter_0000005" || { echo "FAIL: load under valgrind"; exit 1; }
vg "$IO_TEST_BIN" save "$tmp/c" uninit 2>"$tmp/err"; rc=$?
[ "$rc" -eq 99 ] || { echo "FAIL: negative control: valgrind did not flag an uninitialised tensor (rc $rc)"; exit 1; }
grep -q "uninitialised" "$tmp/err" || { echo "FAIL: negative control: unexpected valgrind report"; cat "$tmp/err"; exit 1; }
echo "valgrind: save and load clean; uninitialised input is caught"
