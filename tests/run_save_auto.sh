#!/usr/bin/env bash
# run_save_auto.sh — `run --save-at auto` end to end on the CPU core: which
# points it chose and why (report.json, the text report), that the fp16
# probe finds the skipped step and leaves nothing behind, and that an exec
# trainer gets the points that need no config; from the config, a K that
# ends a data epoch (--epoch-samples) and, for fp16, N minus the loss-scale
# growth window. Negative controls: fp16 that never overflows gets no
# skipped-step point; bf16 gets no probe at all, and without epochs no
# epoch point.
. "$(dirname "$0")/run_lib.sh"
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
OVER=(--precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2)

# fp16 that overflows, no warmup: the probe's skipped step 3 (absorbed) joins 5, 6, 9,
# and 8 leaves the resumed leg a full growth window (2 steps)
run_rc over "${OVER[@]}" --warmup 0 --steps 10 --save-at auto --out "$T/over" --jobs 2
expect_rc 0 "overflowing fp16, auto" over
contains "$T/over.out" "save at auto: 3 (skipped fp16 step, its overflow absorbed by the hysteresis), 5 (odd), 6 (even), 8 (a full loss-scale growth window before N), 9 (N-1);"
json_true "$T/over/report.json" 'd["config"]["save_at"] == [3, 5, 6, 8, 9] and d["config"]["save_auto"] and not d["config"]["save_every"]' "auto points in report.json"
json_true "$T/over/report.json" '"3 (skipped fp16 step" in d["config"]["save_at_why"]' "reasons in report.json"
for k in 3 5 6 8 9; do [ -d "$T/over/resume@$k" ] || fail "no resume@$k leg"; done
[ -z "$(ls -A "$TMPDIR")" ] || fail "the probe left $(ls "$TMPDIR") in TMPDIR"
# the through leg skipped the steps the probe saw
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["step"] == 3 { exit $c["skipped"] != 1 }' \
  "$T/over/through/trace.csv" || fail "through did not skip step 3"

# negative control: fp16 at the default scale never overflows, so no skipped-step point
run_rc plain --precision fp16 --loss-scale-window 3 --steps 10 --save-at auto --out "$T/plain" --jobs 2
expect_rc 0 "non-overflowing fp16, auto" plain
contains "$T/plain.out" "save at auto: 3 (first after warmup), 5 (odd), 6 (even), 7 (a full loss-scale growth window before N), 9 (N-1); fp16: the probe skipped no step;"
lacks "$T/plain.out" "skipped fp16 step"

# bf16: no probe; the warmup comes from the config
run_rc bf16 --warmup 5 --steps 12 --save-at auto --out "$T/bf16" --jobs 2
expect_rc 0 "bf16, auto" bf16
contains "$T/bf16.out" "save at auto: 6 (even, first after warmup), 7 (odd), 11 (N-1);"
lacks "$T/bf16.out" "probe"
lacks "$T/bf16.out" "data epoch"
lacks "$T/bf16.out" "growth window"

# data epochs of 7 steps (28 samples, a global batch of 4): 7 ends the first
run_rc epochs --epoch-samples 28 --steps 10 --save-at auto --out "$T/epochs" --jobs 2
expect_rc 0 "epochs, auto" epochs
contains "$T/epochs.out" "save at auto: 3 (first after warmup), 5 (odd), 6 (even), 7 (last step of a data epoch), 9 (N-1);"

# a flag the trainer rejects is a usage error before anything runs
run_rc bad --no-such-flag --steps 10 --save-at auto --out "$T/bad"
expect_rc 64 "bad flag with auto" bad
[ -e "$T/bad" ] && fail "a rejected run made $T/bad"

# an exec trainer: only the points that need no config
run_rc exec --trainer exec --train-cmd "$(tmpl)" --steps 8 --save-at auto --out "$T/exec"
expect_rc 0 "exec trainer, auto" exec
contains "$T/exec.out" "save at auto: 4 (even), 5 (odd), 7 (N-1); exec trainer: warmup and skipped steps not known;"
exit $((fails > 0))
