#!/usr/bin/env bash
# bench_startup.sh — what the legs of a verdict cost each other: the save
# leg of `run --steps N --save-at K` (the head of the critical path), alone
# and with each of the legs `run` starts beside it, in the same rounds:
#
#   alone        the save leg (train --stop-at K --save-at K, step lock high)
#   +through     and the through leg (step lock low, hashes at K)
#   +resume      and the pre-warmed resume leg (--wait-for-checkpoint on the
#                save leg's checkpoint: the real chain)
#   all          all three, as `run` starts them
#
# For each: the save leg's start to first step, its steps summed, its save;
# the resume leg's set-up, wait, load and steps; the wall of the slowest.
# Also `train --dry-run` and `--dry-run-memory` (run's preparation), timed.
#
#   RC_BIN=build/resumecheck FLAGS="--preset gpu-small --device cuda" N=20 K=10 \
#     REPEAT=2 bash bench/bench_startup.sh
set -u
RC_BIN=${RC_BIN:-build/resumecheck}
N=${N:-20}
K=${K:-10}
REPEAT=${REPEAT:-2}
read -r -a F <<<"${FLAGS:---preset tiny}"
D=$(mktemp -d /tmp/rc_bench_startup.XXXXXX)
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
secs() { python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }
iter=$(printf "iter_%07d" "$K")

timed() { # label command...: wall seconds of one command
  local t0 t1
  t0=$(now)
  "${@:2}" >/dev/null 2>&1
  t1=$(now)
  echo "$1 $(secs "$t0" "$t1") s"
}
MODULE="$(dirname "$RC_BIN")/libresumecheck_cuda.so"
for r in $(seq 1 "$REPEAT"); do
  [ -f "$MODULE" ] && timed "dlopen of the CUDA module:" python3 -c "import ctypes; ctypes.CDLL('$MODULE')"
  timed "python3 alone (subtract):" python3 -c "import ctypes"
  command -v nvidia-smi >/dev/null && timed "nvidia-smi memory.free (NVML):" nvidia-smi --query-gpu=memory.free --format=csv
  timed "train --dry-run:" "$RC_BIN" train "${F[@]}" --steps "$N" --dry-run
  timed "train --dry-run-memory:" "$RC_BIN" train "${F[@]}" --steps "$N" --dry-run-memory
done

# timing.csv phases on one line, steps summed
phases() {
  [ -f "$1" ] || { echo "(no timing.csv)"; return; }
  awk -F, '$1 == "step" { s += $3; n++; next } $1 != "phase" { printf "%s%s=%.2f ", $1, ($2 != "" ? "@" $2 : ""), $3 }
    END { printf "steps(%d)=%.2f\n", n, s }' "$1"
}
combo() { # name with_through with_resume
  local w="$D/$1" pids=() t0 t1
  rm -rf "$w"
  mkdir -p "$w"
  local lock="$w/.step.lock"
  t0=$(now)
  "$RC_BIN" train "${F[@]}" --steps "$N" --stop-at "$K" --save-at "$K" --out "$w/save" --leg save \
    --step-lock "$lock" --step-priority high >"$w/save.log" 2>&1 &
  pids+=($!)
  if [ "$2" = 1 ]; then
    "$RC_BIN" train "${F[@]}" --steps "$N" --save-at "$K,$N" --save-hashes-at "$K" --out "$w/through" \
      --leg through --step-lock "$lock" --step-priority low >"$w/through.log" 2>&1 &
    pids+=($!)
  fi
  if [ "$3" = 1 ]; then
    "$RC_BIN" train "${F[@]}" --steps "$N" --save-at "$N" --resume-from "$w/save/ckpt/$iter" \
      --wait-for-checkpoint --out "$w/resume" --leg "resume@$K" --step-lock "$lock" \
      --step-priority high >"$w/resume.log" 2>&1 &
    pids+=($!)
  fi
  local bad=0
  for p in "${pids[@]}"; do wait "$p" || bad=1; done
  t1=$(now)
  echo "  $1: wall $(secs "$t0" "$t1") s$([ $bad = 1 ] && echo " (a leg FAILED: $(tail -1 "$w"/*.log | tr '\n' ' '))")"
  echo "    save:    $(phases "$w/save/timing.csv")"
  [ "$2" = 1 ] && echo "    through: $(phases "$w/through/timing.csv")"
  [ "$3" = 1 ] && echo "    resume:  $(phases "$w/resume/timing.csv")"
  rm -rf "$w"
}
for r in $(seq 1 "$REPEAT"); do
  echo "round $r"
  combo alone 0 0
  combo +through 1 0
  combo +resume 0 1
  combo all 1 1
done
