#!/usr/bin/env bash
# hostile_run_weak.sh — the run-side weak cases of the reliability review
# (docs/robustness.md), each under `timeout` where a hang is the bug:
#   1. a stale handoff note (its save SIGKILLed after the note): a
#      hand-started `train --wait-for-checkpoint` refuses it (66, "stale")
#      at once; and a save that dies after a waiting leg loaded its note
#      ends that leg (66) instead of leaving it waiting for COMPLETE.
#      Control: RC_TEST_HANDOFF_TRUST_NOTE=1 (the note taken as before)
#      loads the stale note and waits until `timeout` (124).
#   2. an exec save leg whose checkpoint is a symbolic link to through's, or
#      whose files are hard links to through's: the save leg fails (70,
#      "must be a real directory" / "is not its own but through's") and
#      A/A@K is an error, never IDENTICAL. Control: a real copy of the same
#      bytes passes (0).
#   3. `run --out ''` and an --out too long for the legs: 64 before anything
#      is made. Control: the longest --out the legs accept runs (0), for the
#      built-in and an exec trainer.
#   4. `compare` given a FIFO or (as root) a character device: 65, "not a
#      regular file or directory: a FIFO" / "a character device". Control:
#      the same comparison of regular files (0).
source "$(dirname "$0")/run_lib.sh"
need_train

# ---- 1. stale handoff notes
S=$T/stale/s/ckpt/iter_0000002
RC_TEST_HANDOFF=kill "$RC_BIN" train --steps 4 --save-at 2 --handoff --out "$T/stale/s" >/dev/null 2>&1
[ $? = 137 ] || fail "the save with RC_TEST_HANDOFF=kill was not SIGKILLed"
[ -f "$S.handoff.json" ] || fail "the killed save left no handoff note"
waiter() { # NAME [ENV...]: a hand-started pre-warmed leg on $S under timeout 6
  local name=$1
  shift
  env "$@" timeout 6 "$RC_BIN" train --steps 4 --resume-from "$S" --wait-for-checkpoint \
    --out "$T/stale/$name" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
}
waiter w1
[ "$rc" = 66 ] || fail "stale note: exit $rc, want 66: $(cat "$T/w1.err")"
contains "$T/w1.err" "its handoff note is stale (the save that wrote it, pid"
[ -e "$T/stale/w1/trace.csv" ] && [ "$(wc -l <"$T/stale/w1/trace.csv")" -gt 1 ] && fail "stale note: the leg trained"
waiter w2 RC_TEST_HANDOFF_TRUST_NOTE=1
[ "$rc" = 124 ] || fail "control: the trusted stale note should leave the leg waiting until timeout (124), got $rc"
contains "$T/w2.err" "loaded $S before it was durable"

# a save that dies after the waiting leg loaded its note
S=$T/late/s/ckpt/iter_0000002
timeout 20 "$RC_BIN" train --steps 4 --resume-from "$S" --wait-for-checkpoint --out "$T/late/r" \
  >"$T/late.out" 2>"$T/late.err" &
wpid=$!
sleep 0.3
RC_TEST_HANDOFF=delay:1500,kill "$RC_BIN" train --steps 4 --save-at 2 --handoff --out "$T/late/s" >/dev/null 2>&1
wait "$wpid"
rc=$?
[ "$rc" = 66 ] || fail "writer died after the handoff: exit $rc, want 66: $(cat "$T/late.err")"
contains "$T/late.err" "the save that handed it over (pid"

# ---- 2. an exec leg's checkpoint that is another leg's
cat >"$T/linker.sh" <<EOF
#!/usr/bin/env bash
# the fake trainer; then the save leg's checkpoint is replaced by through's
# (HOW: link, hardlink or copy)
bash "$FAKE" "\$@" || exit \$?
out="" leg=""
while [ \$# -gt 0 ]; do
  case "\$1" in --out) out=\$2 ;; --leg) leg=\$2 ;; esac
  shift
done
[ "\$leg" = save ] || exit 0
it=\$out/ckpt/iter_0000002
src=\$(dirname "\$out")/through/ckpt/iter_0000002
rm -rf "\$it"
case "\$HOW" in
  link) ln -s "\$src" "\$it" ;;
  hardlink) cp -al "\$src" "\$it" ;;
  copy) cp -a "\$src" "\$it" ;;
esac
EOF
LT="bash '$T/linker.sh' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
for how in link hardlink copy; do
  HOW=$how run_rc "ln_$how" --trainer exec --train-cmd "$LT" --steps 4 --save-at 2 --jobs 1 --progress off --out "$T/ln_$how"
done
rc_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["exit_code"])' "$1" 2>/dev/null; }
for how in link hardlink; do
  [ "$(rc_of "$T/ln_$how/report.json")" = 70 ] || fail "$how: report exit $(rc_of "$T/ln_$how/report.json"), want 70"
  json_true "$T/ln_$how/report.json" "[l for l in d['legs'] if l['label'] == 'save'][0]['status'] == 'failed'" "$how: the save leg failed"
  json_true "$T/ln_$how/report.json" "[c for c in d['checks'] if c['name'] == 'A/A@2'][0]['status'] == 'error'" "$how: A/A@2 an error, not identical"
done
json_true "$T/ln_link/report.json" "'is a symbolic link to' in [l for l in d['legs'] if l['label'] == 'save'][0]['reason'] and 'must be a real directory' in [l for l in d['legs'] if l['label'] == 'save'][0]['reason']" "link: the reason"
json_true "$T/ln_hardlink/report.json" "\"is not its own but through's\" in [l for l in d['legs'] if l['label'] == 'save'][0]['reason'] and 'is the same file on both sides' in [l for l in d['legs'] if l['label'] == 'save'][0]['reason']" "hardlink: the reason"
[ "$(rc_of "$T/ln_copy/report.json")" = 0 ] || fail "control: a real copy of through's checkpoint: exit $(rc_of "$T/ln_copy/report.json"), want 0"

# ---- 3. --out that the legs cannot take
run_rc empty --steps 4 --save-at 2 --out ''
expect_rc 64 "--out ''" empty
contains "$T/empty.err" "--out: an empty path"
# an absolute directory of exactly LEN bytes (components of at most 200)
dir_of_len() {
  local base=$1 len=$2 d=$1
  while [ ${#d} -lt "$len" ]; do
    local room=$((len - ${#d} - 1))
    [ $room -gt 200 ] && room=200
    [ $room -lt 1 ] && room=1
    d=$d/$(printf '%*s' "$room" '' | tr ' ' d)
  done
  printf '%s' "${d:0:$len}"
}
SUFFIX=/fusion-off/resume@4/ckpt/iter_0000004 # the deepest leg path below --out, steps 4
MAX_SELF=$((1023 - ${#SUFFIX}))
MAX_EXEC=$(($(getconf PATH_MAX /) - 2 - 255 - ${#SUFFIX}))
long=$(dir_of_len "$T/l1" $((MAX_SELF + 1)))
run_rc long --steps 4 --save-at 2 --progress off --out "$long"
expect_rc 64 "--out of $((MAX_SELF + 1)) bytes (built-in trainer)" long
contains "$T/long.err" "is too long: a leg's directories below it would take"
[ -e "$T/l1" ] && fail "the refused --out was created"
ok=$(dir_of_len "$T/l2" "$MAX_SELF")
run_rc longok --steps 4 --save-at 2 --progress off --out "$ok"
expect_rc 0 "control: --out of $MAX_SELF bytes (built-in trainer)" longok
long=$(dir_of_len "$T/l3" $((MAX_EXEC + 1)))
run_rc longx --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --progress off --out "$long"
expect_rc 64 "--out of $((MAX_EXEC + 1)) bytes (exec trainer)" longx
[ -e "$T/l3" ] && fail "the refused exec --out was created"
ok=$(dir_of_len "$T/l4" "$MAX_EXEC")
run_rc longxok --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --progress off --out "$ok"
expect_rc 0 "control: --out of $MAX_EXEC bytes (exec trainer)" longxok
run_rc comp --steps 4 --save-at 2 --out "$T/$(printf '%*s' 256 '' | tr ' ' c)/x"
expect_rc 64 "--out with a 256-byte component" comp
contains "$T/comp.err" "more than NAME_MAX"

# ---- 4. compare on a FIFO or a device
mkfifo "$T/fifo"
printf 'step,loss\n1,2\n' >"$T/a.csv"
cp "$T/a.csv" "$T/b.csv"
timeout 10 "$RC_BIN" compare "$T/fifo" "$T/a.csv" >"$T/cf.out" 2>"$T/cf.err"
rc=$?
[ "$rc" = 65 ] || fail "compare FIFO: exit $rc, want 65"
contains "$T/cf.err" "$T/fifo: not a regular file or directory: a FIFO"
timeout 10 "$RC_BIN" compare "$T/a.csv" "$T/fifo" >"$T/cf2.out" 2>"$T/cf2.err"
[ $? = 65 ] || fail "compare FIFO (second): want 65"
contains "$T/cf2.err" "not a regular file or directory: a FIFO"
if [ "$(id -u)" = 0 ]; then
  mknod "$T/zero" c 1 5
  timeout 10 "$RC_BIN" compare "$T/zero" "$T/a.csv" >"$T/cz.out" 2>"$T/cz.err"
  [ $? = 65 ] || fail "compare a character device: want 65"
  contains "$T/cz.err" "not a regular file or directory: a character device"
else
  echo "SKIPPED (not root): compare against a character device made with mknod"
fi
timeout 10 "$RC_BIN" compare "$T/a.csv" "$T/b.csv" >"$T/cr.out" 2>"$T/cr.err"
[ $? = 0 ] || fail "control: compare two regular traces: want 0: $(cat "$T/cr.err")"
finish
