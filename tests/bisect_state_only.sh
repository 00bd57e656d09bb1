#!/usr/bin/env bash
# bisect_state_only.sh — a run whose traces agree and whose checkpoints
# differ (the save-time side effect of RC_TEST_SAVE_ADVANCES_RNG=1 without
# dropout: only /rng/offset at step 10 differs): no divergent step, so no
# "step -1" anywhere; bisect names the checkpoints and the dataset that
# differ, replays the whole resumed range 6..10 with the legs' saves (5,10
# and 10) and names the save-time side effect. With the replays' saves
# switched off (RC_TEST_BISECT_NO_SAVES=1) nothing the replays do differs,
# but the legs' state census still shows the save changed the through
# process (its before-save census), and bisect says so. Negative control:
# without the census files too, bisect says not-reproduced, naming the
# run's differing dataset, still without "step -1".
. "$(dirname "$0")/bisect_lib.sh"

export RC_TEST_SAVE_ADVANCES_RNG=1
mkrun so 1
bisect so
expect_rc 1 "bisect of a state-only divergence" so
lacks "$T/so.txt" "-1"
contains "$T/so.txt" "no divergent step: the traces agree, the checkpoints differ"
contains "$T/so.txt" "checkpoints that differ: $T/so/through/ckpt/iter_0000010 vs $T/so/resume@5/ckpt/iter_0000010, first /rng/offset"
contains "$T/so.txt" "replay: steps 6..10 with events"
contains "$T/so.txt" "saves at 5,10 (the leg's own, up to the stop)"
contains "$T/so.txt" "located: the train-through process's own save at step 5 changed its state"
jq_true "$T/so.json" 'd["step"] is None and d["cause"]["kind"] == "save-side-effect"' "no step, save-side-effect"
jq_true "$T/so.json" 'd["replay"]["checkpoints"]["identical"] is False and d["replay"]["checkpoints"]["first_difference"].startswith("/rng/offset")' "replays' checkpoints at 10 differ in /rng/offset"

# the replays without their saves: the census still tells
RC_TEST_BISECT_NO_SAVES=1 "$RC_BIN" bisect "$T/so" --out "$T/so-nosave" --json "$T/son.json" >"$T/son.txt" 2>&1
rc=$?
expect_rc 1 "bisect with the replays' saves switched off" son
lacks "$T/son.txt" "-1"
contains "$T/son.txt" "located: the state the resumed process started step 6 from differs from the through process's (the state census at step 5: 1 saved field differs, first rng.offset: through"
contains "$T/son.txt" "the save changed the process that saved"
contains "$T/son.txt" "no replayed step uses it yet"
jq_true "$T/son.json" 'd["verdict"] == "located" and d["cause"]["kind"] == "resume-state" and d["census"]["saved_differ"] == 1' "located from the census"

# negative control: no saves in the replays and no census either
rm -rf "$T/so"/*/census
RC_TEST_BISECT_NO_SAVES=1 "$RC_BIN" bisect "$T/so" --out "$T/so-nosave2" --json "$T/sonc.json" >"$T/sonc.txt" 2>&1
rc=$?
expect_rc 1 "bisect with neither the replays' saves nor a census" sonc
lacks "$T/sonc.txt" "-1"
contains "$T/sonc.txt" "not-reproduced: the run's traces agree and its checkpoints differ (RESUME@5"
contains "$T/sonc.txt" "first /rng/offset"
jq_true "$T/sonc.json" 'd["verdict"] == "not-reproduced" and d["cause"] is None' "not-reproduced"
finish
