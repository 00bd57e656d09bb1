#!/usr/bin/env bash
# fake_trainer.sh — a tiny deterministic "trainer" for `resumecheck run
# --trainer exec` tests (docs/exec-trainer.md is the contract it follows).
#
# State is two integers: weights w and a momentum m, updated per step from
# the step number and the horizon N (the "LR schedule"), so a correct
# resume reproduces train-through exactly. Checkpoints are plain files
# (weights.txt, optim.txt, meta.txt, args.json, COMPLETE) compared byte for
# byte; trace.csv has step, loss and grad_norm columns.
#
#   fake_trainer.sh --steps N [--stop-at S] --save-at LIST [--resume-from DIR]
#                   --out DIR [--leg NAME] [--fusion on|off] [--bug MODE]
#   MODE: none | forget-momentum (resume loses m) | nondet (random bytes
#         in every checkpoint) | crash-on-resume (exit 3) | segv-on-resume
#         (dies by SIGSEGV) | no-complete (never writes COMPLETE) | slow
#         (sleeps 0.2 s per step, to be interrupted) | corrupt-shard (a
#         state.h5 that is not HDF5, different in every run) | horizon (the
#         LR schedule is built for the step the leg stops at, not --steps:
#         deterministic, but a save leg is not a prefix of the through leg)
#         | forget-counter (a step counter c that the census reports as
#         saved is not in the checkpoint: nothing any step computes
#         depends on it, so only the census can see it)
#   --census none | good | malformed: write a state census (docs/census.md)
#         after each save at K < N and after a load; malformed writes a
#         line without its class column
# Options also accept the --name=value form.
set -euo pipefail

steps="" stop="" saves="" resume="" out="" leg="" bug=none census=none
while [ $# -gt 0 ]; do
  case "$1" in
    --*=*) name="${1%%=*}"; val="${1#*=}"; shift ;;
    --*) name="$1"; val="${2-}"; shift; [ $# -gt 0 ] && shift ;;
    *) echo "fake_trainer: unexpected argument '$1'" >&2; exit 64 ;;
  esac
  case "$name" in
    --steps) steps="$val" ;;
    --stop-at) stop="$val" ;;
    --save-at) saves="$val" ;;
    --resume-from) resume="$val" ;;
    --out) out="$val" ;;
    --leg) leg="$val" ;;
    --bug) bug="$val" ;;
    --census) census="$val" ;;
    --fusion) ;; # accepted and ignored: fusion means nothing to this trainer
    *) echo "fake_trainer: unknown option $name" >&2; exit 64 ;;
  esac
done
[ -n "$steps" ] && [ -n "$out" ] || { echo "fake_trainer: --steps and --out are required" >&2; exit 64; }
[ -n "$stop" ] || stop="$steps"

w=12345 m=0 c=0 start=1
if [ -n "$resume" ]; then
  case "$bug" in
    crash-on-resume) echo "fake_trainer: simulated crash while loading $resume" >&2; exit 3 ;;
    segv-on-resume) echo "fake_trainer: about to segfault" >&2; kill -SEGV $$ ;;
  esac
  [ -f "$resume/COMPLETE" ] || { echo "fake_trainer: $resume has no COMPLETE" >&2; exit 65; }
  w=$(cat "$resume/weights.txt")
  last=$(cat "$resume/meta.txt")
  if [ "$bug" = forget-momentum ]; then m=0; else m=$(cat "$resume/optim.txt"); fi
  start=$((last + 1))
  if [ "$bug" != forget-counter ]; then c=$last; fi
fi

census_write() { # step
  [ "$census" != none ] || return 0
  mkdir -p "$out/census"
  local f
  f="$out/census/$(printf 'iter_%07d' "$1").rank0.txt"
  {
    echo "# fake_trainer census"
    printf 'iteration\tsaved\t%s\n' "$1"
    printf 'weights\tsaved\t%s\n' "$w"
    printf 'momentum\tsaved\t%s\n' "$m"
    printf 'counter\tsaved\t%s\n' "$c"
    printf 'pid\tlocal\t%s\tthe process id: a fresh process has its own\n' $$
    if [ "$census" = malformed ]; then printf 'broken line without a class\n'; fi
  } > "$f"
}
if [ -n "$resume" ]; then census_write "$last"; fi

mkdir -p "$out/ckpt"
trace="$out/trace.csv"
[ -f "$trace" ] || echo "step,loss,grad_norm,lr" > "$trace"

save() { # step
  local d
  d="$out/ckpt/$(printf 'iter_%07d' "$1")"
  mkdir -p "$d"
  echo "$w" > "$d/weights.txt"
  echo "$m" > "$d/optim.txt"
  echo "$1" > "$d/meta.txt"
  if [ "$bug" = nondet ]; then echo "$RANDOM$RANDOM $$" > "$d/noise.txt"; fi
  if [ "$bug" = corrupt-shard ]; then printf '\211HDF\r\n\032\n%s' "$RANDOM$$" > "$d/state.h5"; fi
  printf '{"leg": "%s", "pid": %d}\n' "$leg" $$ > "$d/args.json"
  if [ "$bug" != no-complete ]; then echo done > "$d/COMPLETE"; fi
}

# the LR schedule's horizon: --steps, or (bug) the step this leg stops at
horizon="$steps"
if [ "$bug" = horizon ]; then horizon="$stop"; fi
for ((t = start; t <= stop; t++)); do
  if [ "$bug" = slow ]; then sleep 0.2; fi
  lr=$((horizon - t + 1))
  # horizon: grad_norm is measured before the optimizer step applies lr, as
  # real trainers do, so a wrong schedule shows in lr first, in grad_norm a
  # step later (the other modes keep their traces as they were)
  g=$m
  m=$(((m * 7 + t * 13 + w * lr) % 1000003))
  if [ "$bug" != horizon ]; then g=$m; fi
  w=$(((w * 31 + m) % 1000003))
  c=$((c + 1))
  # loss falls with the step; grad_norm follows the momentum
  awk -v t="$t" -v m="$g" -v lr="$lr" \
    'BEGIN { printf "%d,%.9g,%.9g,%d\n", t, 5.0 / (1 + 0.1 * t), m / 1000003.0, lr }' >> "$trace"
  for s in ${saves//,/ }; do
    if [ "$s" = "$t" ]; then
      save "$t"
      if [ "$t" -lt "$steps" ]; then census_write "$t"; fi
    fi
  done
done
echo "fake_trainer: leg ${leg:-?} trained steps $start..$stop" >&2
