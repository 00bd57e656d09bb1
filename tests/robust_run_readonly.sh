#!/usr/bin/env bash
# robust_run_readonly.sh — `run --out` on a read-only file system is refused
# with exit 74 and a message that says so, before any leg starts (the exec
# trainer would leave a sentinel file; there is none), both for a new
# directory under a read-only mount and for the read-only mount itself.
# Negative control: the same run on the same mount, writable, exits 0 and
# starts its legs. Needs an unprivileged user+mount namespace (unshare -rm);
# skips (77) where that is not allowed.
set -uo pipefail
: "${RC_BIN:?}" "${RC_SRC:?}"
if ! command -v unshare >/dev/null || ! unshare -rm true 2>/dev/null; then
  echo "unshare -rm not available: skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mnt"
# the trainer: leaves a sentinel, then runs the fake trainer
cat >"$tmp/trainer.sh" <<SH
#!/usr/bin/env bash
touch "$tmp/started"
exec bash "$RC_SRC/tests/trainers/fake_trainer.sh" "\$@"
SH
unshare -rm bash -s "$RC_BIN" "$tmp" <<'INNER'
set -uo pipefail
bin=$1 tmp=$2 mnt=$2/mnt
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
if ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>/dev/null; then
  echo "cannot mount tmpfs here: skipping"; exit 77
fi
tpl="bash $tmp/trainer.sh --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out}"
run() { "$bin" run --trainer exec --train-cmd "$tpl" --steps 4 --save-at 2 --progress off --out "$@"; }
mkdir "$mnt/exists"
mount -o remount,ro "$mnt"
for out in "$mnt/new/run" "$mnt/exists"; do
  rm -f "$tmp/started"
  run "$out" >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ "$rc" = 74 ] || fail "--out $out on a read-only file system: exit $rc, want 74: $(cat "$tmp/err")"
  grep -q "Read-only file system" "$tmp/err" || fail "the message does not say why: $(cat "$tmp/err")"
  [ ! -e "$tmp/started" ] || fail "--out $out: a leg was started"
  echo "refused: $(cat "$tmp/err")"
done
mount -o remount,rw "$mnt"
rm -f "$tmp/started"
run "$mnt/exists" >"$tmp/out" 2>"$tmp/err" || fail "negative control: the same run on a writable mount failed: $(cat "$tmp/err")"
[ -e "$tmp/started" ] || fail "negative control: no leg started on a writable mount"
umount "$mnt"
exit $((fails > 0))
INNER
