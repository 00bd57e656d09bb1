#!/usr/bin/env bash
# bisect_exec_copy.sh — bisect on a copied run directory reads the copy
# (docs/bisect.md, "A copied or moved run directory"). Runs of an exec
# trainer (tests/trainers/fake_trainer.sh --bug forget-momentum) and of the
# built-in one (--inject data-position-not-saved) are copied elsewhere and
# the originals moved away: bisect of each copy compares and replays from the
# copy's checkpoints (the resumed replay's command names the copy's
# iter_0000003) and says where the run was written. A report path outside
# the run directory is used when it exists (and said so) and refused (66)
# when it does not. Negative control: RC_TEST_BISECT_NO_REBASE=1 (test-only:
# the report's paths as they are, bisect's old behaviour) fails on the same
# copies (66: the loaded checkpoint is not there).
source "$(dirname "$0")/run_lib.sh"

mkdir -p "$T/orig" "$T/copy"
run_rc ex --trainer exec --train-cmd "$(tmpl --bug forget-momentum --census good)" --steps 6 --save-at 3 \
  --out "$T/orig/ex" --progress off
expect_rc 1 "exec run" ex
run_rc core --inject data-position-not-saved --steps 6 --save-at 3 --out "$T/orig/core" --progress off
expect_rc 1 "core run" core
cp -a "$T/orig/ex" "$T/orig/core" "$T/copy/"
mv "$T/orig" "$T/gone" # nothing is left where the reports say the runs were

bisect_rc() { # DIR OUTNAME: bisect DIR, output in $T/OUTNAME.out/.err, JSON in $T/OUTNAME.json
  "$RC_BIN" bisect "$1" --json "$T/$2.json" >"$T/$2.out" 2>"$T/$2.err"
  rc=$?
}

# the exec run's copy: replayed from the copy (the fake trainer logs no events)
bisect_rc "$T/copy/ex" ex
expect_rc 1 "bisect of the exec run's copy" ex
contains "$T/ex.out" "The run wrote its files under $T/orig/ex; they are read under $T/copy/ex"
contains "$T/ex.out" "compared with through@3's: identical"
contains "$T/ex.out" "not-replayable: "
contains "$T/ex.out" "but they wrote no event log"
contains "$T/copy/ex/bisect/resume/log.txt" "--resume-from=$T/copy/ex/save/ckpt/iter_0000003"
json_true "$T/ex.json" "d['resume_from'] == '$T/copy/ex/save/ckpt/iter_0000003' and d['loaded_state']['through'] == '$T/copy/ex/through/ckpt/iter_0000003'" "exec copy's paths"
json_true "$T/ex.json" "d['paths']['run_out'] == '$T/orig/ex' and d['paths']['relocated']" "exec copy: paths"

# the built-in trainer's copy
bisect_rc "$T/copy/core" core
expect_rc 1 "bisect of the core run's copy" core
contains "$T/core.out" "located: "
contains "$T/core.out" "--resume-from $T/copy/core/save/ckpt/iter_0000003"
json_true "$T/core.json" "d['cause']['kind'] == 'resume-state' and d['resume_from'] == '$T/copy/core/save/ckpt/iter_0000003'" "core copy"

# negative control: the report's paths as they are
for r in ex core; do
  RC_TEST_BISECT_NO_REBASE=1 bisect_rc "$T/copy/$r" "norebase_$r"
  expect_rc 66 "bisect of $r's copy without rebasing" "norebase_$r"
  contains "$T/norebase_$r.err" "the checkpoint the resumed leg loaded is not there: $T/orig/$r/save/ckpt/iter_0000003"
done

# a path outside the run directory: refused when missing, used (and said) when there
cp -a "$T/copy/core" "$T/out2"
python3 - "$T/out2/report.json" "$T/elsewhere/iter_0000003" <<'PY' || fail "editing the report"
import json, sys
p, new = sys.argv[1], sys.argv[2]
d = json.load(open(p))
for leg in d["legs"]:
    if leg["resume_from"]:
        leg["resume_from"] = new
json.dump(d, open(p, "w"))
PY
bisect_rc "$T/out2" outside
expect_rc 66 "a loaded checkpoint outside the run directory that does not exist" outside
contains "$T/outside.err" "the checkpoint resume@3 loaded, $T/elsewhere/iter_0000003 is outside the run directory"
contains "$T/outside.err" "and does not exist"
mkdir -p "$T/elsewhere"
cp -a "$T/copy/core/save/ckpt/iter_0000003" "$T/elsewhere/"
bisect_rc "$T/out2" outside_ok
expect_rc 1 "the same checkpoint, there" outside_ok
contains "$T/outside_ok.out" "the checkpoint resume@3 loaded, $T/elsewhere/iter_0000003 is outside the run directory: used as it is."
contains "$T/outside_ok.out" "--resume-from $T/elsewhere/iter_0000003"
finish
