#!/usr/bin/env bash
# io_full_fs.sh — a save onto a full file system (a 256 KiB tmpfs) and onto a
# read-only one fails with exit code 74 (RC_EXIT_IOERR), says why, and leaves
# no COMPLETE, no shard and no temp file. Negative control: the same save on
# a roomy tmpfs succeeds. Needs an unprivileged user+mount namespace
# (unshare -rm); skips (77) where that is not allowed.
set -uo pipefail
: "${IO_TEST_BIN:?}"
if ! command -v unshare >/dev/null || ! unshare -rm true 2>/dev/null; then
  echo "unshare -rm not available: skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mnt"
unshare -rm bash -s "$IO_TEST_BIN" "$tmp/mnt" <<'INNER'
set -uo pipefail
bin=$1 mnt=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if ! mount -t tmpfs -o size=256k tmpfs "$mnt" 2>/dev/null; then
  echo "cannot mount tmpfs here: skipping"; exit 77
fi
"$bin" save "$mnt/full" big 1048576 2>"$mnt/../err" ; rc=$?
[ "$rc" -eq 74 ] || fail "full file system: exit $rc, expected 74"
grep -q "No space left on device" "$mnt/../err" || fail "message does not say the disk is full: $(cat "$mnt/../err")"
left=$(find "$mnt/full" -type f | wc -l)
[ "$left" -eq 0 ] || fail "full file system: $left file(s) left behind: $(find "$mnt/full" -type f)"
echo "full: $(cat "$mnt/../err")"
umount "$mnt"

mount -t tmpfs -o size=64m tmpfs "$mnt"
"$bin" save "$mnt/roomy" big 1048576 || fail "negative control: the same save on a roomy tmpfs failed"
[ -f "$mnt/roomy/iter_0000005/COMPLETE" ] || fail "negative control: no COMPLETE"
mount -o remount,ro "$mnt"
"$bin" save "$mnt/ro" 2>"$mnt/../err2" ; rc=$?
[ "$rc" -eq 74 ] || fail "read-only file system: exit $rc, expected 74"
grep -q "Read-only file system" "$mnt/../err2" || fail "message: $(cat "$mnt/../err2")"
[ ! -e "$mnt/ro" ] || fail "read-only: something was created"
echo "read-only: $(cat "$mnt/../err2")"
umount "$mnt"
INNER
