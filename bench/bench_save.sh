#!/usr/bin/env bash
# bench_save.sh — what a checkpoint save and a verified load cost inside a
# real `resumecheck train` leg, against dd writing and cat reading as many
# bytes on the same disk. Not a test: it times things (its own timers,
# date +%s.%N); results go in bench/NOTES_io.md.
#
# A save or a load cannot be timed from outside a process on its own, so
# three kinds of leg alternate, REPS times each, all with the same config:
#   A  train --steps 2 --stop-at 1                     init + step 1
#   S  train --steps 2 --stop-at 1 --save-at 1         init + step 1 + save
#   L  train --steps 2 --resume-from S's iter_0000001  init + load + step 2
#   S2 train --steps 4 --stop-at 3 --save-at 1,3       a second save, in steady state
#      (its timing.csv's second save: the staging buffer is reserved and
#      warm; S's save is the first of a process, right after start-up)
# and each leg's own step time (its timing.csv) is taken off its wall time:
#   save = (S - S's step) - (A - A's step),  load = (L - L's step) - (A - A's step)
# (since a resumed leg no longer draws the weights it loads, L - A
# understates the load: the in-process load phase is the measure)
# The legs' own timing.csv also has the save and load phases timed inside
# the process (rc_model_save / rc_model_load); they are reported too, and on
# a shared machine they are much less noisy than the wall-time differences.
# The load verifies what the loader always verifies: COMPLETE against the
# manifest, the shard's size and every byte (the chunk hashes of a version-2
# manifest on several threads, else the whole-file SHA-256), every
# dataset's SHA-256. The references, on the same disk and as many bytes as the
# checkpoint directory holds, alternate with the legs:
#   write: dd if=/dev/zero of=F bs=1M count=N conv=fdatasync
#   read:  cat SHARD >/dev/null and dd if=SHARD of=/dev/null bs=1M, page
#          cache warm as it is for a load right after a save
# Reported: medians (and minima) of each and the ratios save/dd and
# load/read.
#
# usage: bench/bench_save.sh [WORK_DIR]
#   env: RC_BIN       the resumecheck binary (default: build-cpu/resumecheck)
#        BENCH_FLAGS  model flags (default: a CPU config with a ~0.5 GB
#                     checkpoint); on an H200 host for example
#                     BENCH_FLAGS='--device cuda --preset gpu-small'
#        REPS (default 3), KEEP=1 keeps WORK_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${RC_BIN:-$src/build-cpu/resumecheck}
flags=${BENCH_FLAGS:---preset small --hidden 512 --ffn 1024 --heads 8 --vocab 8192 --seq-len 16 --micro-batch 1 --microbatches 1}
reps=${REPS:-3}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/rc_bench_save_XXXXXX")}
[ -x "$bin" ] || { echo "no $bin: build first or set RC_BIN" >&2; exit 1; }
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
read -r -a F <<<"$flags"

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "n/a"}'; }
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
minimum() { sort -g | head -1; }
# wall seconds of one command, its output discarded
wall() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null 2>"$work/last.err" || { echo "failed: $*" >&2; cat "$work/last.err" >&2; exit 1; }
  t1=$(now)
  sub "$t1" "$t0"
}
# the seconds of the last step in a leg's timing.csv
step_s() { grep '^step,' "$1/timing.csv" | tail -1 | cut -d, -f3; }
# the seconds of phase $2 (save, load) in a leg's timing.csv
phase_s() { grep "^$2," "$1/timing.csv" | head -1 | cut -d, -f3; }
phase_last_s() { grep "^$2," "$1/timing.csv" | tail -1 | cut -d, -f3; }

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc), sha_ni: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no)"
echo "binary: $bin"
echo "flags: ${F[*]}"
df -h "$work" | tail -1

# One save first, to know the size and to have a checkpoint to load.
"$bin" train "${F[@]}" --steps 2 --stop-at 1 --save-at 1 --out "$work/s0" >/dev/null 2>&1
dir=$work/s0/ckpt/iter_0000001
shard=$(ls "$dir"/shard_*.h5 | head -1)
bytes=$(du -sb "$dir" | cut -f1)
mib=$(((bytes + (1 << 20) - 1) >> 20))
echo "checkpoint: $bytes bytes in $dir ($mib MiB for dd)"
avail=$(df -B1 --output=avail "$work" | tail -1)
[ "$avail" -gt $((4 * bytes)) ] || { echo "need $((4 * bytes)) bytes free in $work" >&2; exit 1; }

: >"$work/save2.t"; : >"$work/save.t"; : >"$work/load.t"; : >"$work/psave.t"; : >"$work/pload.t"; : >"$work/dd.t"; : >"$work/cat.t"; : >"$work/ddr.t"
for i in $(seq "$reps"); do
  rm -rf "$work/a" "$work/s" "$work/l" "$work/s2" "$work/dd.bin"
  sync
  ta=$(wall "$bin" train "${F[@]}" --steps 2 --stop-at 1 --out "$work/a")
  ta=$(sub "$ta" "$(step_s "$work/a")")
  sync
  ts=$(wall "$bin" train "${F[@]}" --steps 2 --stop-at 1 --save-at 1 --out "$work/s")
  ts=$(sub "$ts" "$(step_s "$work/s")")
  tl=$(wall "$bin" train "${F[@]}" --steps 2 --resume-from "$work/s/ckpt/iter_0000001" --out "$work/l")
  tl=$(sub "$tl" "$(step_s "$work/l")")
  sync
  wall "$bin" train "${F[@]}" --steps 4 --stop-at 3 --save-at 1,3 --out "$work/s2" >/dev/null
  phase_last_s "$work/s2" save >>"$work/save2.t"
  rm -rf "$work/s2"
  sync
  td=$(wall dd if=/dev/zero of="$work/dd.bin" bs=1M count="$mib" conv=fdatasync)
  rm -f "$work/dd.bin"
  cat "$shard" >/dev/null # warm, as after a save
  tc=$(wall cat "$shard")
  tr=$(wall dd if="$shard" of=/dev/null bs=1M)
  phase_s "$work/s" save >>"$work/psave.t"
  phase_s "$work/l" load >>"$work/pload.t"
  sub "$ts" "$ta" >>"$work/save.t"
  sub "$tl" "$ta" >>"$work/load.t"
  echo "$td" >>"$work/dd.t"
  echo "$tc" >>"$work/cat.t"
  echo "$tr" >>"$work/ddr.t"
  echo "run $i: outside the step: A $ta s, S $ts s, L $tl s; save $(tail -1 "$work/save.t") s," \
    "load $(tail -1 "$work/load.t") s (in-process: save $(tail -1 "$work/psave.t") s, load" \
    "$(tail -1 "$work/pload.t") s); dd write $td s, cat $tc s, dd read $tr s"
done

save_m=$(median <"$work/save.t"); load_m=$(median <"$work/load.t")
dd_m=$(median <"$work/dd.t"); cat_m=$(median <"$work/cat.t"); ddr_m=$(median <"$work/ddr.t")
read_m=$(printf '%s\n%s\n' "$cat_m" "$ddr_m" | minimum)
echo "== medians of $reps (minima in brackets)"
echo "save:                  $save_m s [$(minimum <"$work/save.t")]"
echo "dd write + fdatasync:  $dd_m s [$(minimum <"$work/dd.t")]"
echo "load (verified, wall):  $load_m s [$(minimum <"$work/load.t")]  (not comparable: a resumed leg skips the weight draws A makes)"
echo "cat SHARD:             $cat_m s [$(minimum <"$work/cat.t")]"
echo "dd SHARD of=/dev/null: $ddr_m s [$(minimum <"$work/ddr.t")]"
echo "save phase (timing.csv): $(median <"$work/psave.t") s [$(minimum <"$work/psave.t")]"
echo "load phase (timing.csv): $(median <"$work/pload.t") s [$(minimum <"$work/pload.t")]"
echo "second save (timing.csv): $(median <"$work/save2.t") s [$(minimum <"$work/save2.t")]"
echo "save phase / dd:       $(ratio "$(median <"$work/psave.t")" "$dd_m")x"
echo "second save / dd:      $(ratio "$(median <"$work/save2.t")" "$dd_m")x"
echo "load phase / read:     $(ratio "$(median <"$work/pload.t")" "$read_m")x"
echo "save / dd:             $(ratio "$save_m" "$dd_m")x   (issue 15 goal <= 1.2 on gpu-small)"
echo "(load: the in-process phase above is the measure; issue 15 goal <= 1.2 on gpu-small; read = faster of cat and dd)"
