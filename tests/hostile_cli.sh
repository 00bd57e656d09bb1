#!/usr/bin/env bash
# hostile_cli.sh — the CLI against hostile and careless use (issue 16): what
# the report writers do with paths that are not regular files, configs too
# large for the machine, duplicate flags, one --progress vocabulary, exit
# codes listed by --help, and messages with their reasons.
#
# Every node a writer is pointed at is made here, under a mktemp -d
# directory: FIFOs, symlinks, a directory, a socket and (as root only, via
# mknod) character devices with /dev/full's (1,7) and /dev/null's (1,3)
# numbers. No writer is ever pointed at anything under /dev. FIFO readers
# run under `timeout`, and every command under test runs under `timeout`, so
# the test cannot hang.
#
# Negative control of the writers: RC_TEST_OUTPUT_ALWAYS_RENAME=1 restores
# the old rule (temp file renamed over whatever the path is); the same probes
# must then report the damage (FIFO, device and symlink replaced by regular
# files) — so each probe is shown to fail before the fix.
set -u
: "${RC_BIN:?}" "${RC_SRC:?}"
T=$(mktemp -d /tmp/rc_hostile.XXXXXX)
fails=0
skipped=""
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
is_root() { [ "$(id -u)" = 0 ]; }
TO=30 # seconds any one command may take

FAKE="$RC_SRC/tests/trainers/fake_trainer.sh"
TPL="bash $FAKE --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"

# write_with WRITER PATH: one writer writes PATH; status in $rc, stderr in $T/err.
# Writers: run's --json, --junit, --summary-md, --plot and compare's --json.
write_with() {
  local w=$1 path=$2
  rm -rf "$T/out"
  case $w in
  run-json | run-junit | run-summary-md | run-plot)
    local flag=--${w#run-}
    timeout $TO "$RC_BIN" run --trainer exec --train-cmd "$TPL" --steps 4 --save-at 2 \
      --progress off --out "$T/out" "$flag" "$path" >"$T/stdout" 2>"$T/err"
    ;;
  compare-json)
    timeout $TO "$RC_BIN" compare "$RC_FIXTURES/io/good" "$RC_FIXTURES/io/good" --json "$path" \
      >"$T/stdout" 2>"$T/err"
    ;;
  esac
  rc=$?
}

# the first bytes each writer writes, to recognise its output
signature() {
  case $1 in
  run-json) echo '"schema": "resumecheck.run-report"' ;;
  run-junit) echo '<testsuites' ;;
  run-summary-md) echo 'resumecheck' ;;
  run-plot) echo '<svg' ;;
  compare-json) echo '"schema": "resumecheck.compare-report"' ;;
  esac
}

# start_reader FIFO FILE: a reader that copies FIFO to FILE and gives up
# after a few seconds; waits until it has the FIFO open.
start_reader() {
  timeout 5 cat "$1" >"$2" &
  reader=$!
  local i
  for i in $(seq 50); do
    # the FIFO is open for reading once the reader's fd points at it
    if ls -l /proc/$reader/fd 2>/dev/null | grep -q "$(basename "$1")"; then return; fi
    sleep 0.05
  done
}

# probe WRITER CASE: makes the node for CASE in a fresh directory, lets
# WRITER write to it, and prints nothing when the outcome is right, else one
# line saying what went wrong.
probe() {
  local w=$1 c=$2 d="$T/p/$1-$2"
  rm -rf "$d" && mkdir -p "$d"
  local sig
  sig=$(signature "$w")
  local p="$d/target" why=""
  case $c in
  missing)
    write_with "$w" "$p"
    [ "$rc" = 0 ] || why="exit $rc: $(tail -1 "$T/err")"
    [ -z "$why" ] && { [ -f "$p" ] && grep -qF -- "$sig" "$p" || why="no report written"; }
    ;;
  regular)
    echo old >"$p"
    write_with "$w" "$p"
    [ "$rc" = 0 ] || why="exit $rc: $(tail -1 "$T/err")"
    [ -z "$why" ] && { grep -qF -- "$sig" "$p" || why="the file was not replaced by the report"; }
    ;;
  symlink-regular)
    mkdir "$d/real" && echo old >"$d/real/file" && ln -s real/file "$p"
    write_with "$w" "$p"
    [ "$rc" = 0 ] || why="exit $rc: $(tail -1 "$T/err")"
    [ -z "$why" ] && { [ -L "$p" ] || why="the symlink was replaced"; }
    [ -z "$why" ] && { grep -qF -- "$sig" "$d/real/file" || why="the link's target was not written"; }
    [ -z "$why" ] && { [ -z "$(ls "$d/real" | grep -v '^file$')" ] || why="a file was left beside the target"; }
    ;;
  fifo-reader | symlink-fifo)
    mkfifo "$d/fifo"
    if [ "$c" = fifo-reader ]; then p="$d/fifo"; else ln -s fifo "$p"; fi
    start_reader "$d/fifo" "$d/got"
    write_with "$w" "$p"
    wait "$reader" 2>/dev/null
    [ "$rc" = 0 ] || why="exit $rc: $(tail -1 "$T/err")"
    [ -z "$why" ] && { [ -p "$d/fifo" ] || why="the FIFO was replaced"; }
    [ -z "$why" ] && [ "$c" = symlink-fifo ] && { [ -L "$p" ] || why="the symlink was replaced"; }
    [ -z "$why" ] && { grep -qF -- "$sig" "$d/got" || why="the reader did not get the report"; }
    ;;
  fifo-no-reader)
    mkfifo "$p"
    write_with "$w" "$p"
    [ "$rc" = 124 ] && why="hung (killed by timeout)"
    [ -z "$why" ] && { [ -p "$p" ] || why="the FIFO was replaced (exit $rc)"; }
    [ -z "$why" ] && { [ "$rc" = 74 ] || why="exit $rc, want 74"; }
    [ -z "$why" ] && { grep -q "FIFO with no reader" "$T/err" || why="message: $(tail -1 "$T/err")"; }
    ;;
  directory)
    mkdir "$p"
    write_with "$w" "$p"
    [ -d "$p" ] && [ -z "$(ls -A "$p")" ] || why="the directory was changed"
    [ -z "$why" ] && { [ "$rc" = 74 ] || why="exit $rc, want 74"; }
    [ -z "$why" ] && { grep -q "is a directory" "$T/err" || why="message: $(tail -1 "$T/err")"; }
    ;;
  dangling)
    ln -s nodir/file "$p"
    write_with "$w" "$p"
    [ -L "$p" ] || why="the symlink was replaced (exit $rc)"
    [ -z "$why" ] && { [ ! -e "$d/nodir" ] || why="the missing directory was created"; }
    [ -z "$why" ] && { [ "$rc" = 74 ] || why="exit $rc, want 74"; }
    [ -z "$why" ] && { grep -q "symbolic link to nodir/file" "$T/err" || why="message: $(tail -1 "$T/err")"; }
    ;;
  socket)
    python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$p"
    write_with "$w" "$p"
    [ -S "$p" ] || why="the socket was replaced (exit $rc)"
    [ -z "$why" ] && { [ "$rc" = 74 ] || why="exit $rc, want 74"; }
    [ -z "$why" ] && { grep -q "is a socket" "$T/err" || why="message: $(tail -1 "$T/err")"; }
    ;;
  chr-full) # /dev/full's numbers: every write fails with ENOSPC
    mknod "$p" c 1 7
    write_with "$w" "$p"
    [ -c "$p" ] || why="the device node was replaced (exit $rc)"
    [ -z "$why" ] && { [ "$rc" = 74 ] || why="exit $rc, want 74"; }
    [ -z "$why" ] && { grep -q "No space left on device" "$T/err" || why="message: $(tail -1 "$T/err")"; }
    ;;
  chr-null) # /dev/null's numbers: writes succeed and vanish
    mknod "$p" c 1 3
    write_with "$w" "$p"
    [ -c "$p" ] || why="the device node was replaced (exit $rc)"
    [ -z "$why" ] && { [ "$rc" = 0 ] || why="exit $rc, want 0: $(tail -1 "$T/err")"; }
    ;;
  esac
  [ -z "$(ls "$d" | grep '\.tmp\.')" ] || why="${why:+$why; }a temp file was left behind"
  echo "$why"
}

WRITERS="run-json run-junit run-summary-md run-plot compare-json"
CASES="missing regular symlink-regular fifo-reader symlink-fifo fifo-no-reader directory dangling"
command -v python3 >/dev/null && CASES="$CASES socket" || skipped="$skipped socket(no python3)"
if is_root; then
  CASES="$CASES chr-full chr-null"
else
  skipped="$skipped chr-full,chr-null(need root for mknod)"
fi

for w in $WRITERS; do
  for c in $CASES; do
    why=$(probe "$w" "$c")
    if [ -z "$why" ]; then ok "$w -> $c"; else fail "$w -> $c: $why"; fi
  done
done

# Negative control: with the old rule the probes must see the damage.
CONTROL="symlink-regular fifo-reader fifo-no-reader dangling"
is_root && CONTROL="$CONTROL chr-full chr-null"
for c in $CONTROL; do
  why=$(RC_TEST_OUTPUT_ALWAYS_RENAME=1 probe run-json "$c")
  if [ -n "$why" ]; then ok "control (old rule) run-json -> $c detected: $why"; else fail "control: the old rule was not detected for $c"; fi
done
export -n RC_TEST_OUTPUT_ALWAYS_RENAME 2>/dev/null

# ---- configs too large for the machine: refused with 75 before allocating
# (before the fix: SIGABRT, 134). The huge config needs terabytes; the tiny
# one is refused only when RC_TEST_MEM_AVAILABLE pretends 1 MB, and trains
# (negative control) when it pretends plenty.
timeout $TO "$RC_BIN" train --hidden 65536 --vocab 4000000 --steps 2 --out "$T/huge" >"$T/stdout" 2>"$T/err"
rc=$?
if [ "$rc" = 75 ] && grep -q "needs .* GiB of memory" "$T/err" && grep -q "is available (MemAvailable)" "$T/err"; then
  ok "train --hidden 65536 --vocab 4000000 -> 75: $(cat "$T/err")"
else
  fail "train --hidden 65536 --vocab 4000000: exit $rc, want 75 naming need and MemAvailable: $(cat "$T/err")"
fi
[ ! -e "$T/huge" ] || fail "the refused train created its --out"
RC_TEST_MEM_AVAILABLE=1000000 timeout $TO "$RC_BIN" train --steps 2 --out "$T/tiny1" >"$T/stdout" 2>"$T/err"
rc=$?
if [ "$rc" = 75 ] && grep -q "is available (RC_TEST_MEM_AVAILABLE)" "$T/err"; then ok "tiny with 1 MB available -> 75"; else fail "tiny with 1 MB available: exit $rc: $(cat "$T/err")"; fi
RC_TEST_MEM_AVAILABLE=$((1 << 40)) timeout $TO "$RC_BIN" train --steps 2 --out "$T/tiny2" >"$T/stdout" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && ok "control: tiny with 1 TiB available trains" || fail "control: tiny with 1 TiB available: exit $rc: $(cat "$T/err")"
"$RC_BIN" train --help | grep -q "75" || fail "train --help does not list 75"

# ---- duplicate flags: 64 naming the flag (before the fix: the last one won)
dup() { # dup WHAT FLAG CMD...: CMD must exit 64 naming FLAG "given twice"
  local what=$1 flag=$2
  shift 2
  timeout $TO "$@" >"$T/stdout" 2>"$T/err"
  rc=$?
  if [ "$rc" = 64 ] && grep -qF -- "$flag given twice" "$T/err"; then ok "$what -> 64 ($(head -1 "$T/err"))"; else fail "$what: exit $rc, want 64 naming $flag: $(cat "$T/err")"; fi
}
dup "train --steps 8 --steps 6" --steps "$RC_BIN" train --steps 8 --steps 6 --out "$T/dup"
dup "train --dropout twice" --dropout "$RC_BIN" train --dropout 0.1 --dropout 0.2 --out "$T/dup"
dup "train --tie-embeddings twice" --tie-embeddings "$RC_BIN" train --tie-embeddings --tie-embeddings --out "$T/dup"
dup "train --out twice" --out "$RC_BIN" train --out "$T/dup1" --out "$T/dup2"
dup "run --steps twice" --steps "$RC_BIN" run --steps 4 --steps 6 --save-at 2 --out "$T/dup"
dup "run --aa twice" --aa "$RC_BIN" run --aa --aa --steps 4 --save-at 2 --out "$T/dup"
dup "run, a train flag twice" --seed "$RC_BIN" run --steps 4 --save-at 2 --seed 1 --seed 2 --progress off --out "$T/dupr"
dup "compare --json twice" --json "$RC_BIN" compare "$RC_FIXTURES/io/good" "$RC_FIXTURES/io/good" --json "$T/j1" --json "$T/j2"
dup "compare --deep twice" --deep "$RC_BIN" compare "$RC_FIXTURES/io/good" "$RC_FIXTURES/io/good" --deep --deep
dup "bisect --context twice" --context "$RC_BIN" bisect "$T" --context 2 --context 3
[ ! -e "$T/dup" ] && [ ! -e "$T/j1" ] && [ ! -e "$T/j2" ] || fail "a refused command wrote something"
# control: a repeatable flag stays repeatable, and a single flag passes
timeout $TO "$RC_BIN" train --inject rng-not-saved --inject data-position-not-saved --dropout 0.1 --dry-run >/dev/null 2>"$T/err" &&
  ok "control: --inject twice (two bugs) accepted" || fail "control: --inject twice refused: $(cat "$T/err")"
timeout $TO "$RC_BIN" compare "$RC_FIXTURES/io/good" "$RC_FIXTURES/io/good" --ignore 'a*' --ignore 'b*' >/dev/null 2>"$T/err" &&
  ok "control: compare --ignore twice accepted" || fail "control: compare --ignore twice refused: $(cat "$T/err")"

# ---- one --progress vocabulary: train takes run's modes
for mode in auto live plain off; do
  timeout $TO "$RC_BIN" train --steps 2 --progress "$mode" --out "$T/prog-$mode" >/dev/null 2>"$T/err-$mode"
  rc=$?
  [ "$rc" = 0 ] && ok "train --progress $mode" || fail "train --progress $mode: exit $rc: $(cat "$T/err-$mode")"
done
[ "$(grep -c '^\[train\] step [12]/2' "$T/err-plain")" = 2 ] || fail "--progress plain: not one line per step: $(cat "$T/err-plain")"
[ ! -s "$T/err-off" ] && [ ! -s "$T/err-auto" ] || fail "--progress off/auto (not a terminal) printed: $(cat "$T/err-off" "$T/err-auto")"
grep -q $'\r' "$T/err-live" || fail "--progress live: no line rewritten in place"
"$RC_BIN" train --progress bogus --out "$T/prog-x" >/dev/null 2>"$T/err"
[ $? = 64 ] && grep -q "auto | live | plain | off" "$T/err" && ok "train --progress bogus -> 64 naming the modes" || fail "train --progress bogus: $(cat "$T/err")"

# ---- every --help lists every exit code its subcommand can return
helps() { # helps SUB CODE...
  local sub=$1 code
  shift
  "$RC_BIN" "$sub" --help >"$T/help" 2>&1 || fail "$sub --help failed"
  for code in "$@"; do
    grep -Eq "(^|[^0-9])$code([^0-9]|$)" "$T/help" || fail "$sub --help does not list exit code $code"
  done
}
helps train 0 64 65 66 70 74 75 125
helps run 0 1 2 3 64 65 70 74 125 130 143
helps compare 0 1 64 65 66 70 74
helps inspect 0 64 65 66 70 74
helps bisect 0 1 2 64 65 66 70 74 125
helps bugs 0 64
# and the codes provoked here are among them: train without a GPU, a bad --device
"$RC_BIN" train --device cuda --steps 2 --out "$T/cuda" >/dev/null 2>"$T/err"
rc=$?
"$RC_BIN" train --help | grep -Eq "(^|[^0-9])$rc([^0-9]|$)" && ok "train --device cuda here: exit $rc, listed by --help" || fail "train --device cuda: exit $rc not in --help"

# ---- messages: bisect prints one "error:" prefix; train says why it cannot write
"$RC_BIN" bisect "$T/no-such-run" >"$T/stdout" 2>"$T/err"
if grep -q "error: error:" "$T/stdout" "$T/err"; then fail "bisect prints 'error: error:': $(cat "$T/stdout")"; else ok "bisect: one error prefix ($(grep '^error' "$T/stdout"))"; fi
mkdir -p "$T/ro" && chmod 555 "$T/ro" && chmod 755 "$T"
as_user=""
if is_root; then command -v setpriv >/dev/null && as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"; fi
if ! is_root || [ -n "$as_user" ]; then
  $as_user "$RC_BIN" train --steps 2 --out "$T/ro" >/dev/null 2>"$T/err"
  rc=$?
  [ "$rc" = 74 ] && grep -q "Permission denied" "$T/err" && ok "train into a read-only --out: 74, says why ($(cat "$T/err"))" || fail "train read-only: exit $rc: $(cat "$T/err")"
else
  skipped="$skipped read-only-out(root without setpriv)"
fi

[ -n "$skipped" ] && echo "skipped cases:$skipped"
exit $((fails > 0))
