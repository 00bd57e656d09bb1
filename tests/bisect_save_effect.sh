#!/usr/bin/env bash
# bisect_save_effect.sh — a save that changes the saving process's state (the
# test hook RC_TEST_SAVE_ADVANCES_RNG=1 advances the dropout RNG after the
# state is written, as a save drawing from the RNG would): the replays keep
# the legs' own saves, so the train-through replay saves at 5 as the leg did,
# and bisect names the save-time side effect (the through leg replayed
# without that save agrees with the resumed one), not "not reproduced".
# Negative controls: with the replays' saves switched off
# (RC_TEST_BISECT_NO_SAVES=1, bisect as it was) the through replay no longer
# trains as its leg did, and bisect says so (replay-mismatch) instead of an
# answer; without the hook the run is identical (exit 0).
. "$(dirname "$0")/bisect_lib.sh"

export RC_TEST_SAVE_ADVANCES_RNG=1
mkrun fx 1 --dropout 0.1
bisect fx
expect_rc 1 "bisect of a save-time side effect" fx
contains "$T/fx.txt" "located: the train-through process's own save at step 5 changed its state"
contains "$T/fx.txt" "through: 146 events" # 144 operations, 2 expert_bias updates
contains "$T/fx.txt" "saves at 5 (the leg's own, up to the stop)"
contains "$T/fx.txt" "each replay's trace is its leg's in the run"
lacks "$T/fx.txt" "not-reproduced"
jq_true "$T/fx.json" 'd["cause"]["kind"] == "save-side-effect" and d["cause"]["step"] == 6' "cause: save-side-effect at step 6"
jq_true "$T/fx.json" 'd["replay"]["through"]["saves"] == [5] and d["replay"]["resume"]["saves"] == []' "through replay kept its save at 5"
jq_true "$T/fx.json" 'd["replay"]["probe"]["agrees_with_resume"] is True and d["replay"]["probe"]["saves"] == []' "probe without the save agrees"
jq_true "$T/fx.json" '"rng_offset" in d["step_state"]["differing_fields"]' "step_state: rng_offset"
jq_true "$T/fx.json" 't["kind"] == "dropout" and "offset" in fe["differing_fields"]' "first differing event: the dropout offset"
# the replay's checkpoint went into the bisect directory, the run's is untouched
[ -f "$T/fx/bisect/through/ckpt/iter_0000005/COMPLETE" ] || fail "the through replay did not save into bisect/through"
# a second bisect replaces its earlier replay (the trainer refuses to overwrite a checkpoint)
bisect fx
expect_rc 1 "a second bisect of the same run" fx

# negative control: the replays without the legs' saves do not train as the legs did
RC_TEST_BISECT_NO_SAVES=1 "$RC_BIN" bisect "$T/fx" --out "$T/fx-nosave" --json "$T/fxn.json" >"$T/fxn.txt" 2>&1
rc=$?
expect_rc 1 "bisect with the replays' saves switched off" fxn
contains "$T/fxn.txt" "replay-mismatch: the train-through replay's trace"
contains "$T/fxn.txt" "the replay did not reproduce the leg"
lacks "$T/fxn.txt" "not-reproduced"
jq_true "$T/fxn.json" 'd["verdict"] == "replay-mismatch" and d["replay"]["traces_match"] is False' "replay-mismatch"

# negative control: no save-time side effect, no divergence
unset RC_TEST_SAVE_ADVANCES_RNG
mkrun clean 0 --dropout 0.1
bisect clean
expect_rc 0 "bisect of the clean run" clean
finish
