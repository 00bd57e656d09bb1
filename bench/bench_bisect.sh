#!/usr/bin/env bash
# bench_bisect.sh — what the bisect event log costs a training step.
#
# usage: bench/bench_bisect.sh RESUMECHECK [PRESET] [STEPS] [REPS] [DEVICE]
#        (defaults: tiny 200 5 cpu)
#
# Three variants of `train --preset PRESET --steps STEPS`, interleaved REPS
# times so that drift in machine load hits all of them alike:
#   off    no --events (the default path: one NULL check per event site)
#   armed  --events FILE --events-from-step beyond STEPS: the file is open but
#          no step logs, so every site takes the same NULL branch as `off`;
#          off vs armed is therefore the noise floor of this measurement
#   on     --events FILE --events-from-step 1: every step logs every event
# Step time = sum of timing.csv seconds over steps 2..STEPS (step 1 warms up),
# divided by STEPS-1; the median over REPS is reported. The event count per
# step is the number of NULL checks an `off` step makes (docs/bisect.md).
set -eu
bin=${1:?usage: bench_bisect.sh RESUMECHECK [PRESET] [STEPS] [REPS] [DEVICE]}
preset=${2:-tiny} steps=${3:-200} reps=${4:-5} device=${5:-cpu}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# timing.csv: phase,step,seconds; the step rows after the first (docs/trace.md)
step_time() { awk -F, '$1=="step"{if(seen++)s+=$3}END{printf "%.6f", s/(seen-1)}' "$1/timing.csv"; }
median() { sort -g | awk '{a[NR]=$1}END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

common=(train --preset "$preset" --steps "$steps" --device "$device")
for r in $(seq 1 "$reps"); do
  "$bin" "${common[@]}" --out "$t/off" >/dev/null
  step_time "$t/off" >>"$t/off.times"; echo >>"$t/off.times"
  "$bin" "${common[@]}" --out "$t/armed" --events "$t/armed.ev" --events-from-step $((steps + 1)) >/dev/null
  step_time "$t/armed" >>"$t/armed.times"; echo >>"$t/armed.times"
  "$bin" "${common[@]}" --out "$t/on" --events "$t/on.ev" --events-from-step 1 >/dev/null
  step_time "$t/on" >>"$t/on.times"; echo >>"$t/on.times"
done
off=$(median <"$t/off.times") armed=$(median <"$t/armed.times") on=$(median <"$t/on.times")
per_step=$(($(wc -l <"$t/on.ev") / steps))
echo "preset=$preset device=$device steps=$steps reps=$reps"
echo "events per step (= NULL checks per step when off): $per_step"
echo "armed log bytes: $(wc -c <"$t/armed.ev") (must be 0)"
printf "off    %.3f ms/step  (runs: %s)\n" "$(echo "$off*1000" | bc -l)" "$(tr '\n' ' ' <"$t/off.times")"
printf "armed  %.3f ms/step  (%+.2f%% vs off: noise floor)\n" "$(echo "$armed*1000" | bc -l)" "$(echo "($armed/$off-1)*100" | bc -l)"
printf "on     %.3f ms/step  (%+.2f%% vs off)\n" "$(echo "$on*1000" | bc -l)" "$(echo "($on/$off-1)*100" | bc -l)"
