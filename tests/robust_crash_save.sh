#!/usr/bin/env bash
# robust_crash_save.sh — a `train` leg killed with SIGKILL at every write step
# of its saves (the RC_TEST_CRASH_AT_WRITE hook, docs/robustness.md) never
# leaves a loadable half checkpoint, and training still ends in the same
# bytes. For each crash point N (1, 2, ... until the leg no longer crashes):
#   - the leg dies by SIGKILL (exit 137);
#   - every iter_* directory without COMPLETE is refused by
#     `train --resume-from` (exit 65, or 66 when not even manifest.json was
#     written) with a message naming COMPLETE, and no step is trained;
#   - resuming from the latest complete checkpoint (or from scratch when there
#     is none) into the same --out succeeds, leaves no *.tmp.* file, and its
#     final shard and manifest are byte-identical to an uncrashed run's.
# Negative controls: without the hook the leg exits 0 and writes COMPLETE;
# the hook's first point does kill it; a checkpoint with COMPLETE loads.
set -uo pipefail
: "${RC_BIN:?}"
T=$(mktemp -d /tmp/rc_robust_crash.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# a small model: the test is about saves, not training
MODEL=(--hidden 16 --ffn 32 --vocab 64 --seq-len 16)
train() { "$RC_BIN" train "${MODEL[@]}" --steps 2 "$@"; }

# reference: no crash
train --save-at 1,2 --out "$T/ref" >"$T/ref.log" 2>&1 || { fail "reference run failed"; cat "$T/ref.log"; exit 1; }
REF="$T/ref/ckpt/iter_0000002"
[ -f "$REF/COMPLETE" ] || fail "negative control: the reference run wrote no COMPLETE"
npoints=$(RC_TEST_CRASH_TRACE=1 train --save-at 1,2 --out "$T/count" 2>&1 | grep -c '^crash point')
[ "$npoints" -ge 20 ] || fail "only $npoints crash points in two saves"

# the refused load must not train: no trace rows afterwards
refused() { # DIR: an incomplete checkpoint
  local out="$T/refused" rc
  rm -rf "$out"
  # horizon 3, so that even iter_0000002 is a valid place to resume from
  "$RC_BIN" train "${MODEL[@]}" --steps 3 --resume-from "$1" --out "$out" >"$T/refused.log" 2>&1
  rc=$?
  case $rc in
  65) grep -q "no COMPLETE marker" "$T/refused.log" || fail "N=$N: exit 65 without naming COMPLETE: $(cat "$T/refused.log")" ;;
  66) grep -q "no manifest.json and no COMPLETE marker" "$T/refused.log" || fail "N=$N: exit 66: $(cat "$T/refused.log")" ;;
  *) fail "N=$N: --resume-from $(basename "$1") without COMPLETE: exit $rc, want 65 (66 before the manifest): $(cat "$T/refused.log")" ;;
  esac
  if [ -f "$out/trace.csv" ] && [ "$(wc -l <"$out/trace.csv")" -gt 1 ]; then
    fail "N=$N: a step was trained from an incomplete checkpoint"
  fi
}

same() { # DIR: must equal the reference's final checkpoint
  cmp -s "$1/shard_00000_of_00001.h5" "$REF/shard_00000_of_00001.h5" || fail "N=$N: final shard differs from the uncrashed run"
  cmp -s "$1/manifest.json" "$REF/manifest.json" || fail "N=$N: final manifest differs from the uncrashed run"
  cmp -s "$1/COMPLETE" "$REF/COMPLETE" || fail "N=$N: final COMPLETE differs"
}

N=0
crashed=0
while :; do
  N=$((N + 1))
  X="$T/x"
  rm -rf "$X"
  RC_TEST_CRASH_AT_WRITE=$N train --save-at 1,2 --out "$X" >"$T/x.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then break; fi
  [ "$rc" = 137 ] || { fail "N=$N: exit $rc, want 137 (SIGKILL)"; break; }
  grep -q "RC_TEST_CRASH_AT_WRITE=$N: SIGKILL" "$T/x.log" || fail "N=$N: the hook did not say where it crashed"
  crashed=$((crashed + 1))
  latest=""
  for d in "$X"/ckpt/iter_*; do
    [ -d "$d" ] || continue
    if [ -f "$d/COMPLETE" ]; then latest=$d; else refused "$d"; fi
  done
  case "$latest" in
  */iter_0000002) same "$latest" ;; # died after COMPLETE: nothing to redo
  */iter_0000001)
    train --save-at 2 --resume-from "$latest" --out "$X" >"$T/r.log" 2>&1 || fail "N=$N: resume from iter_0000001 failed: $(tail -3 "$T/r.log")"
    same "$X/ckpt/iter_0000002" ;;
  "")
    train --save-at 1,2 --out "$X" >"$T/r.log" 2>&1 || fail "N=$N: re-run after a crash in the first save failed: $(tail -3 "$T/r.log")"
    same "$X/ckpt/iter_0000002" ;;
  esac
  left=$(find "$X/ckpt" -name '*.tmp.*')
  [ -z "$left" ] || fail "N=$N: temporary files left after the re-save: $left"
  [ "$N" -gt 200 ] && { fail "the hook never stopped crashing"; break; }
done
[ "$crashed" -ge 1 ] || fail "negative control: RC_TEST_CRASH_AT_WRITE=1 did not kill the leg"
[ "$crashed" = "$npoints" ] || fail "crashed at $crashed points, the trace listed $npoints"
[ "$fails" = 0 ] && echo "killed at $crashed write steps of two saves: no incomplete checkpoint loaded, every re-save byte-identical, no temp file left"
exit $((fails > 0))
