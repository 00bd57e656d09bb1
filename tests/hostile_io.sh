#!/usr/bin/env bash
# hostile_io.sh — what a load or a save meets when files in a checkpoint are
# not what they should be (issue 16, items 6 and 7 and the io weak items;
# docs/robustness.md "What a load opens"), through the CLI on a tiny run.
# Every case runs under `timeout`, so a load that blocks or never ends
# fails instead of hanging:
#   manifest.json / COMPLETE a symlink to /dev/zero (made in the temp dir),
#   a symlink to a FIFO, a FIFO, a directory  -> 65 naming the file and what it is
#   the shard a FIFO (train --resume-from and inspect) -> 65 "is a FIFO"
#   a forged per-dataset SHA-256 (COMPLETE rewritten to match) -> 65 naming the dataset
# Each has its control: the same checkpoint restored resumes (exit 0).
#
#   hostile_io.sh            the cases above (no privileges needed)
#   hostile_io.sh full-disk  disk full while the manifest or COMPLETE is written
#                            (a tmpfs sized to hold the shard and args.json
#                            only, in an unprivileged user+mount namespace):
#                            74, "disk full", and the directory left as it
#                            was; control: a roomy tmpfs saves. Skips (77)
#                            where such a mount is not allowed.
# RC_BIN may name another build (e.g. one from before the fixes, to see
# the cases fail).
set -uo pipefail
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_hostile_io.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
TINY=(--preset tiny --steps 2)

# the checkpoint every case starts from
"$RC_BIN" train "${TINY[@]}" --stop-at 1 --save-at 1 --out "$T/src" >/dev/null 2>"$T/src.err" ||
  { cat "$T/src.err" >&2; echo "FAIL: cannot make the checkpoint" >&2; exit 1; }
SRC=$T/src/ckpt/iter_0000001
SHARD=shard_00000_of_00001.h5

# resume NAME DIR: train --resume-from DIR under timeout; sets $rc, output in $T/NAME.err
resume() {
  timeout 60 "$RC_BIN" train "${TINY[@]}" --resume-from "$2" --out "$T/$1.out" >/dev/null 2>"$T/$1.err"
  rc=$?
}
# expect NAME WANT_RC TEXT...: the last command's code and every TEXT in its stderr
expect() {
  local name=$1 want=$2
  shift 2
  if [ "$rc" = 124 ]; then
    fail "$name: still running after 60 s (killed)"
  elif [ "$rc" != "$want" ]; then
    fail "$name: exit $rc, want $want: $(head -c 400 "$T/$name.err")"
  fi
  for t in "$@"; do grep -qF -- "$t" "$T/$name.err" || fail "$name: message lacks '$t': $(head -c 400 "$T/$name.err")"; done
  echo "  $name -> $rc  $(head -1 "$T/$name.err" | cut -c1-200)"
}
# fresh NAME: a copy of the checkpoint to spoil, in $d
fresh() {
  d=$T/$1/ckpt/iter_0000001
  mkdir -p "$T/$1/ckpt"
  cp -r "$SRC" "$d"
}

full_disk() {
  if ! command -v unshare >/dev/null || ! unshare -rm true 2>/dev/null; then
    echo "unshare -rm (user+mount namespace) not available: skipping"
    exit 77
  fi
  unshare -rm bash -s "$RC_BIN" "$T" "$SRC" <<'INNER'
set -uo pipefail
bin=$1 T=$2 SRC=$3
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
mkdir -p "$T/mnt"
if ! mount -t tmpfs -o size=64m tmpfs "$T/mnt" 2>/dev/null; then
  echo "cannot mount tmpfs here: skipping"; exit 77
fi
umount "$T/mnt"
pages() { echo $(( ($(stat -c %s "$1") + 4095) / 4096 )); }
shard=$(pages "$SRC/shard_00000_of_00001.h5")
args=$(pages "$SRC/args.json")
manifest=$(pages "$SRC/manifest.json")
# room for: the shard and args.json (manifest fails); and the manifest too (COMPLETE fails)
for case in "manifest:$((shard + args))" "COMPLETE:$((shard + args + manifest))" "control:$((shard + args + manifest + 64))"; do
  what=${case%%:*} npages=${case#*:}
  out=$T/full_$what
  mkdir -p "$out"
  mount -t tmpfs -o size=$((npages * 4096)) tmpfs "$T/mnt" || { fail "mount"; continue; }
  ln -sfn "$T/mnt" "$out/ckpt" # only the checkpoint lands on the small file system
  before=$(cd "$T/mnt" && find . | sort | tr '\n' ' ')
  timeout 60 "$bin" train --preset tiny --steps 2 --stop-at 1 --save-at 1 --out "$out" >/dev/null 2>"$out.err"
  rc=$?
  after=$(cd "$T/mnt" && find . | sort | tr '\n' ' ')
  if [ "$what" = control ]; then
    [ "$rc" = 0 ] || fail "control: a roomy tmpfs: exit $rc: $(cat "$out.err")"
    [ -f "$T/mnt/iter_0000001/COMPLETE" ] || fail "control: no COMPLETE"
  else
    [ "$rc" = 74 ] || fail "disk full at $what: exit $rc, want 74: $(cat "$out.err")"
    grep -q "disk full" "$out.err" || fail "disk full at $what: message does not say so: $(cat "$out.err")"
    [ "$before" = "$after" ] || fail "disk full at $what: left behind: [$before] -> [$after]"
  fi
  echo "  disk full at $what ($npages pages) -> $rc  $(head -1 "$out.err" | cut -c1-200)"
  umount "$T/mnt"
done
[ "$fails" = 0 ]
INNER
  local r=$?
  [ "$r" = 77 ] && exit 77
  [ "$r" = 0 ] || fails=$((fails + 1))
  [ "$fails" = 0 ] && echo "hostile_io full-disk: all cases passed"
  exit $((fails > 0))
}
[ "${1:-}" = full-disk ] && full_disk

# control: the untouched copy resumes
fresh control
resume control "$d"
expect control 0

mkfifo "$T/a_fifo"
for f in manifest.json COMPLETE; do
  fresh "zero_$f"; ln -sf /dev/zero "$d/.zero"; rm "$d/$f"; ln -s "$d/.zero" "$d/$f"
  resume "zero_$f" "$d"; expect "zero_$f" 65 "$f" "symbolic link"
  fresh "linkfifo_$f"; rm "$d/$f"; ln -s "$T/a_fifo" "$d/$f"
  resume "linkfifo_$f" "$d"; expect "linkfifo_$f" 65 "$f" "symbolic link"
  fresh "fifo_$f"; rm "$d/$f"; mkfifo "$d/$f"
  resume "fifo_$f" "$d"; expect "fifo_$f" 65 "$f" "is a FIFO"
  fresh "dir_$f"; rm "$d/$f"; mkdir "$d/$f"
  resume "dir_$f" "$d"; expect "dir_$f" 65 "$f" "is a directory"
done

fresh fifo_shard; rm "$d/$SHARD"; mkfifo "$d/$SHARD"
resume fifo_shard "$d"; expect fifo_shard 65 "$SHARD" "is a FIFO"
timeout 60 "$RC_BIN" inspect "$d/$SHARD" >/dev/null 2>"$T/inspect_fifo.err"; rc=$?
expect inspect_fifo 65 "is a FIFO"
timeout 60 "$RC_BIN" inspect "$SRC/$SHARD" >/dev/null 2>"$T/inspect_control.err"; rc=$?
expect inspect_control 0

# a forged per-dataset hash: COMPLETE rewritten to match the edited manifest
forge() { # DIR FORGE(0|1): rewrites the manifest (first dataset's hash altered if FORGE=1)
  python3 - "$1/manifest.json" "$2" <<'PY'
import json, sys
path, forge = sys.argv[1], sys.argv[2] == "1"
text = open(path).read()
ds = json.loads(text)["shards"][0]["datasets"][0]
h = ds["sha256"]
new = (("b" if h[0] == "a" else "a") + h[1:]) if forge else h
open(path, "w").write(text.replace(h, new, 1))
print(ds["path"])
PY
  (cd "$1" && sha256sum manifest.json >COMPLETE)
}
if command -v python3 >/dev/null; then
  fresh forged_control; forge "$d" 0 >/dev/null
  resume forged_control "$d"; expect forged_control 0
  fresh forged_hash; ds=$(forge "$d" 1)
  resume forged_hash "$d"; expect forged_hash 65 "dataset $ds" "SHA-256"
else
  echo "  (python3 missing: forged per-dataset hash case not run)"
fi

[ "$fails" = 0 ] && echo "hostile_io: all cases passed"
exit $((fails > 0))
