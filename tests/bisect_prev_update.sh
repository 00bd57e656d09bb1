#!/usr/bin/env bash
# bisect_prev_update.sh — the first divergent step S is after K+1 and its
# inputs already differ: with an fp16 loss scaler that is not saved and a
# growth window of 6, the resumed process's growth tracker restarts at 0, so
# step 6's scaler update doubles the scale in the train-through process only
# and step 7 (S) starts from another scale. Bisect must not blame step 7's
# first differing operation (an output-layer backward, whose gradients the
# scale multiplies) but name the update of step 6: the loss_scaler event,
# growth_tracker. With the default window (1000) the scale never changes
# before N: no step differs, but the state census fails the run at the
# resume point and bisect names the tracker from it. Negative control: the
# same run without the bug is identical and bisect exits 0.
. "$(dirname "$0")/bisect_lib.sh"
FP16="--precision fp16 --inject loss-scaler-not-saved"

mkrun ls 1 $FP16 --loss-scale-window 6
bisect ls
expect_rc 1 "bisect of the loss scaler" ls
contains "$T/ls.txt" "first divergence: TRACE resume@5 at step 7"
contains "$T/ls.txt" "replay: steps 6..7 with events"
contains "$T/ls.txt" "located: step 6, loss_scaler: growth_tracker differs — the first differing update of step 6"
contains "$T/ls.txt" "that operation is not blamed"
contains "$T/ls.txt" "the state going into step 6 already differed (growth_tracker)"
jq_true "$T/ls.json" 'd["cause"]["kind"] == "previous-update" and d["cause"]["step"] == 6 and d["cause"]["event"]["kind"] == "loss_scaler"' "cause: step 6's loss_scaler update"
jq_true "$T/ls.json" '"growth_tracker" in d["previous_step"]["first_update"]["differing_fields"]' "growth_tracker differs"
jq_true "$T/ls.json" 'd["focus_step"] == 7 and t["kind"] == "backward" and t["name"] == "output_layer"' "step 7's first differing event is the output-layer backward"
jq_true "$T/ls.json" '"loss_scale" in d["step_state"]["differing_fields"]' "step 7 starts from another loss scale"

# the scale never changes before N: only the census shows the lost tracker
mkrun quiet 1 $FP16
bisect quiet
expect_rc 1 "bisect of the run whose scale never changes" quiet
contains "$T/quiet.txt" "state census at step 5"
contains "$T/quiet.txt" "loss_scaler.growth_tracker: through 5, resumed 0 (saved: not restored by the load)"
jq_true "$T/quiet.json" 'd["cause"]["kind"] == "resume-state"' "cause: the state at the resume point"
# negative control
mkrun clean 0 --precision fp16
bisect clean
expect_rc 0 "bisect of the run without the bug" clean
finish
