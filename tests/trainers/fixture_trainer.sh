#!/usr/bin/env bash
# fixture_trainer.sh — an exec "trainer" (docs/exec-trainer.md) that trains
# nothing: it lays out what a test prepared, so that `resumecheck run`'s
# checks and reports can be driven by hand-made checkpoints, traces and
# censuses (tests/run_census_*.sh, tests/run_report_*.sh).
#
#   fixture_trainer.sh --steps N --stop-at S --save-at LIST [--resume-from DIR]
#                      --out DIR --leg NAME --fixture FIX
#
# The leg's role is FIX/NAME (through, save, aa, resume@K) when that
# directory exists, else FIX/fresh for a leg that starts at step 0 and
# FIX/resumed for one that loads a checkpoint. From its role directory it
# copies the trace.csv rows of the steps it trains (after the header),
# ckpt/iter_%07d for every save step it reaches, and census/* whole. A
# resumed leg loads like a real one: no COMPLETE in --resume-from, exit 65.
set -euo pipefail

steps="" stop="" saves="" resume="" out="" leg="" fix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --*=*) name="${1%%=*}"; val="${1#*=}"; shift ;;
    --*) name="$1"; val="${2-}"; shift; [ $# -gt 0 ] && shift ;;
    *) echo "fixture_trainer: unexpected argument '$1'" >&2; exit 64 ;;
  esac
  case "$name" in
    --steps) steps="$val" ;;
    --stop-at) stop="$val" ;;
    --save-at) saves="$val" ;;
    --resume-from) resume="$val" ;;
    --out) out="$val" ;;
    --leg) leg="$val" ;;
    --fixture) fix="$val" ;;
    *) echo "fixture_trainer: unknown option $name" >&2; exit 64 ;;
  esac
done
[ -n "$steps" ] && [ -n "$out" ] && [ -d "$fix" ] ||
  { echo "fixture_trainer: --steps, --out and an existing --fixture are required" >&2; exit 64; }
[ -n "$stop" ] || stop="$steps"

start=1 role="$fix/fresh"
if [ -n "$resume" ]; then
  [ -f "$resume/COMPLETE" ] || { echo "fixture_trainer: $resume has no COMPLETE" >&2; exit 65; }
  k=$(basename "$resume")
  k=$((10#${k#iter_}))
  start=$((k + 1)) role="$fix/resumed"
fi
[ -d "$fix/$leg" ] && role="$fix/$leg"

mkdir -p "$out/ckpt"
if [ -f "$role/trace.csv" ]; then
  awk -F, -v a="$start" -v b="$stop" 'NR == 1 || ($1 >= a && $1 <= b)' "$role/trace.csv" >"$out/trace.csv"
fi
if [ -d "$role/census" ]; then
  mkdir -p "$out/census"
  cp "$role/census/"* "$out/census/"
fi
for s in ${saves//,/ }; do
  if [ "$s" -ge "$start" ] && [ "$s" -le "$stop" ]; then
    src="$role/ckpt/$(printf 'iter_%07d' "$s")"
    [ -d "$src" ] || { echo "fixture_trainer: the fixture has no $src" >&2; exit 70; }
    cp -r "$src" "$out/ckpt/"
  fi
done
echo "fixture_trainer: leg ${leg:-?} laid out steps $start..$stop from $role" >&2
