#!/usr/bin/env bash
# hostile_readers.sh — every subcommand against a FIFO, a zero device and a
# symbolic link loop in the place of each file it reads (docs/robustness.md,
# "Every reader"): compare (traces, checkpoint files, shards, manifests,
# COMPLETE, args.json), inspect (a shard), bisect (report.json, the legs'
# traces, the census), run (--config, --data, and an exec trainer whose
# trace, checkpoint files and census are replaced after it wrote them) and
# train (--data). Each case runs under `timeout`; it must end (never 124)
# with the code of a refusal and the message naming the file (65: "is a
# FIFO", "is a character device", "a symbolic link that loops"). A report
# larger than its cap is refused before it is read.
#
# The zero device is made with mknod (c 1 5) in the test's own temp
# directory as root; without root those cases are skipped, and said so.
# Controls: the same inputs as regular files pass; RC_TEST_READ_ANY_FILE=1
# (the readers as before: blocking open, any kind, no cap) keeps `run`
# past SIGTERM on a FIFO trace.csv, makes bisect block on the FIFO
# report.json (124) and read the zero one until memory runs out; and `cat` of a FIFO under a timeout is killed (124), `head -c`
# of the zero node reads as much as asked, `cat` of the loop fails.
source "$(dirname "$0")/run_lib.sh"
need_train
TO=20 # seconds: every case ends in well under one

ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
KINDS="fifo loop"
if [ "$ROOT" = 1 ]; then KINDS="fifo zero loop"; else echo "SKIPPED (not root): every zero-device case (mknod needs root)"; fi
# spoil KIND PATH: PATH becomes a FIFO, a zero device node or a link to itself
spoil() {
  rm -rf "$2"
  case "$1" in
    fifo) mkfifo "$2" ;;
    zero) mknod "$2" c 1 5 ;;
    loop) ln -s "$(basename "$2")" "$2" ;;
  esac
}
what_of() { # the words a refusal uses for KIND
  case "$1" in
    fifo) echo "is a FIFO" ;;
    zero) echo "is a character device" ;;
    loop) echo "a symbolic link that loops" ;;
  esac
}
# probe NAME WANT TEXT CMD...: CMD under timeout ends with WANT (a list of
# codes, "65" or "1 65"), its output naming TEXT (with TEXT_IF=CODE set:
# only when it ended with CODE)
probe() {
  local name=$1 want=$2 text=$3
  shift 3
  timeout "$TO" "$@" >"$T/$name.out" 2>&1
  rc=$?
  if [ "$rc" = 124 ]; then
    fail "$name: still running after $TO s (killed)"
    return
  fi
  case " $want " in *" $rc "*) ;; *) fail "$name: exit $rc, want $want: $(head -c 300 "$T/$name.out")" ;; esac
  [ -n "${TEXT_IF:-}" ] && [ "$rc" != "$TEXT_IF" ] && return # only a refusal names it
  [ -z "$text" ] || grep -qF -- "$text" "$T/$name.out" || fail "$name: output lacks '$text': $(head -c 300 "$T/$name.out")"
}

# ---- the inputs: an exec run with a census, a diverging built-in run, a shard
FAKE_CENSUS="$(tmpl --census good)"
run_rc ex --trainer exec --train-cmd "$FAKE_CENSUS" --steps 4 --save-at 2 --progress off --out "$T/ex"
expect_rc 0 "the exec run every compare case starts from" ex
SEED=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --steps 6 --save-at 3
  --first-microbatch-policy legacy --progress off)
run_rc sd "${SEED[@]}" --out "$T/sd"
expect_rc 1 "the diverging run every bisect case starts from" sd
"$RC_BIN" train --preset tiny --steps 2 --save-at 2 --out "$T/st" >/dev/null 2>&1 || fail "train for a shard"
SHARD=shard_00000_of_00001.h5

# ---- compare: a run directory against a copy with one file spoiled
for f in through/trace.csv through/ckpt/iter_0000002/weights.txt through/ckpt/iter_0000002/args.json \
  through/ckpt/iter_0000002/COMPLETE; do
  for k in $KINDS; do
    rm -rf "$T/exb"
    cp -a "$T/ex" "$T/exb"
    spoil "$k" "$T/exb/$f"
    case "$f" in
      */weights.txt | */args.json) words="not a regular file or directory in B" ;;
      *) words="$(what_of "$k")" ;;
    esac
    probe "cmp_$(basename "$f")_$k" 65 "$words" "$RC_BIN" compare "$T/ex" "$T/exb"
  done
done
for f in manifest.json $SHARD COMPLETE; do
  for k in $KINDS; do
    rm -rf "$T/stb"
    cp -a "$T/st" "$T/stb"
    spoil "$k" "$T/stb/ckpt/iter_0000002/$f"
    probe "cmp_${f}_$k" 65 "$f" "$RC_BIN" compare "$T/st/ckpt/iter_0000002" "$T/stb/ckpt/iter_0000002"
  done
done
probe cmp_control 0 "IDENTICAL" "$RC_BIN" compare "$T/ex" "$T/ex"

# ---- inspect: the shard itself
for k in $KINDS; do
  rm -rf "$T/stb"
  cp -a "$T/st" "$T/stb"
  spoil "$k" "$T/stb/ckpt/iter_0000002/$SHARD"
  probe "inspect_$k" 65 "$(what_of "$k")" "$RC_BIN" inspect "$T/stb/ckpt/iter_0000002/$SHARD"
done
probe inspect_control 0 "" "$RC_BIN" inspect "$T/st/ckpt/iter_0000002/$SHARD"

# ---- bisect: the report; the legs' traces (a bisect that checks its
# replays against them refuses them, 65; one that does not read them still
# names the divergence, 1); the census is auxiliary (1, the divergence
# still named, the census "could not be compared")
# (spoiled in place: the report names the legs' files where the run wrote them)
cp -a "$T/sd" "$T/sd_orig"
fresh_sd() {
  rm -rf "$T/sd"
  cp -a "$T/sd_orig" "$T/sd"
}
for f in report.json through/trace.csv resume@3/trace.csv through/census/iter_0000003.rank0.txt; do
  for k in $KINDS; do
    fresh_sd
    spoil "$k" "$T/sd/$f"
    want=65 only=
    case "$f" in
      *census*) want=1 ;;
      *trace.csv) want="1 65" only=65 ;;
    esac
    TEXT_IF=$only probe "bisect_$(basename "$f")_$k" "$want" "$(what_of "$k")" "$RC_BIN" bisect "$T/sd" \
      --out "$T/bisect_out"
  done
done
# a report past its 64 MiB cap is refused before it is read
fresh_sd
truncate -s 65M "$T/sd/report.json"
probe bisect_big 65 "more than the 67108864 this file may have" "$RC_BIN" bisect "$T/sd" --out "$T/bisect_out"
fresh_sd
probe bisect_control 1 "" "$RC_BIN" bisect "$T/sd" --out "$T/bisect_out"

# ---- run: --config and --data; an exec trainer that spoils its own files
for k in $KINDS; do
  spoil "$k" "$T/in_$k"
  # (--config is checked by access(2) first: a loop says so in strerror's words)
  words=$(what_of "$k")
  [ "$k" = loop ] && words="Too many levels of symbolic links"
  probe "run_config_$k" 66 "$words" "$RC_BIN" run --steps 2 --save-at 1 --config "$T/in_$k" --out "$T/rc_$k"
  [ -e "$T/rc_$k" ] && fail "run --config $k: made its --out"
  probe "train_data_$k" 65 "$(what_of "$k")" "$RC_BIN" train --preset tiny --steps 2 --data "$T/in_$k" --out "$T/td_$k"
  # run's legs refuse it; the run says so (a leg failed)
  probe "run_data_$k" 70 "$(what_of "$k")" "$RC_BIN" run --preset tiny --steps 2 --save-at 1 --progress off \
    --data "$T/in_$k" --out "$T/rd_$k"
done
printf 'the tokens of a small data file %.0s' $(seq 2000) >"$T/data.txt"
probe train_data_control 0 "" "$RC_BIN" train --preset tiny --steps 2 --data "$T/data.txt" --out "$T/td_ok"

cat >"$T/spoiler.sh" <<EOF
#!/usr/bin/env bash
# the fake trainer; then the through leg's HFILE becomes HKIND
bash "$FAKE" "\$@" || exit \$?
out="" leg=""
while [ \$# -gt 0 ]; do
  case "\$1" in --out) out=\$2 ;; --leg) leg=\$2 ;; esac
  shift
done
[ "\$leg" = through ] && [ -n "\${HFILE:-}" ] || exit 0
p=\$out/\$HFILE
rm -rf "\$p"
case "\$HKIND" in
  fifo) mkfifo "\$p" ;;
  zero) mknod "\$p" c 1 5 ;;
  loop) ln -s "\$(basename "\$p")" "\$p" ;;
esac
EOF
SP="bash '$T/spoiler.sh' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} --census good"
for f in trace.csv ckpt/iter_0000002/weights.txt ckpt/iter_0000002/args.json ckpt/iter_0000002/COMPLETE \
  census/iter_0000002.rank0.txt; do
  for k in $KINDS; do
    case "$f" in
      */weights.txt | */args.json) words="not a regular file or directory in A" ;;
      *) words="$(what_of "$k")" ;;
    esac
    HFILE=$f HKIND=$k probe "run_$(basename "$f")_$k" 65 "$words" "$RC_BIN" run --trainer exec \
      --train-cmd "$SP" --steps 4 --save-at 2 --jobs 1 --progress off --out "$T/rx_$(basename "$f")_$k"
  done
done
probe run_exec_control 0 "IDENTICAL" "$RC_BIN" run --trainer exec --train-cmd "$SP" --steps 4 --save-at 2 \
  --jobs 1 --progress off --out "$T/rx_ok"

# ---- controls: the same probes against the readers as they were
# (RC_TEST_READ_ANY_FILE=1: opened blocking, whatever they are, no cap):
# the FIFO report blocks bisect until timeout, the zero report streams
# (bounded here by a 1 GiB address space so the control cannot hurt the host)
fresh_sd
spoil fifo "$T/sd/report.json"
RC_TEST_READ_ANY_FILE=1 timeout 3 "$RC_BIN" bisect "$T/sd" --out "$T/bisect_out" >/dev/null 2>&1
[ $? = 124 ] || fail "control: with the old reader a FIFO report.json did not block bisect"
if [ "$ROOT" = 1 ]; then
  spoil zero "$T/sd/report.json"
  (ulimit -v 1048576 && RC_TEST_READ_ANY_FILE=1 exec timeout 5 "$RC_BIN" bisect "$T/sd" --out "$T/bisect_out") \
    >"$T/ctl_zero.out" 2>&1
  rc=$?
  grep -qF "is a character device" "$T/ctl_zero.out" && fail "control: the old reader refused the zero node"
  [ "$rc" != 0 ] || fail "control: the old reader read a zero report.json and succeeded"
fi
# run: an exec leg's FIFO trace.csv held run's scheduler in open(2), and
# SIGTERM did not end it (only SIGKILL did)
HFILE=trace.csv HKIND=fifo RC_TEST_READ_ANY_FILE=1 "$RC_BIN" run --trainer exec --train-cmd "$SP" \
  --steps 4 --save-at 2 --jobs 1 --progress off --out "$T/rx_ctl" >/dev/null 2>&1 &
cpid=$!
for _ in $(seq 200); do [ -p "$T/rx_ctl/through/trace.csv" ] && break; sleep 0.1; done
sleep 1
kill -TERM "$cpid"
sleep 3
if kill -0 "$cpid" 2>/dev/null; then
  kill -KILL "$cpid"
else
  fail "control: with the old reader a FIFO trace.csv did not keep run past SIGTERM"
fi
wait "$cpid" 2>/dev/null
# and what the probes are to any naive reader
mkfifo "$T/ctl_fifo"
timeout 2 cat "$T/ctl_fifo" >/dev/null 2>&1
[ $? = 124 ] || fail "control: cat of a FIFO without a writer was not still blocked after 2 s"
if [ "$ROOT" = 1 ]; then
  mknod "$T/ctl_zero" c 1 5
  [ "$(head -c 1048576 "$T/ctl_zero" | wc -c)" = 1048576 ] || fail "control: the zero node did not stream"
fi
ln -s ctl_loop "$T/ctl_loop"
cat "$T/ctl_loop" >/dev/null 2>&1 && fail "control: cat of a link loop succeeded"
finish
