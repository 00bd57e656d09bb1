#!/usr/bin/env bash
# bisect_exec_stale_buffer.sh — `resumecheck bisect` on a PyTorch exec run
# (docs/bisect.md, "PyTorch trainers"): tests/trainers/torch_bisect_trainer.py
# with --bug stale-buffer (its attn modules' running scale is a non-persistent
# buffer the forward updates and reads) diverges at step K+1 = 4, and bisect
# replays both legs with the event log on (python/resumecheck/events.py) and
# names blocks/0/attn's forward at step 4 (same fp_in, other fp_out, state
# going into the step identical): cause `operation`, in the text and in
# --json's first_event. Negative control: the correct trainer's run is
# identical and bisect says there is nothing to bisect (exit 0, no replay).
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch

tr_tmpl() { # the test trainer's template, extra flags appended
  printf "'%s' '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} %s" \
    "$PY" "$RC_SRC/tests/trainers/torch_bisect_trainer.py" "$*"
}
bisect_rc() { # NAME ARGS...: bisect $T/NAME, output in $T/NAME.b.out/.b.err
  local name=$1
  shift
  "$RC_BIN" bisect "$T/$name" --json "$T/$name.bisect.json" "$@" >"$T/$name.b.out" 2>"$T/$name.b.err"
  rc=$?
}

# control: the correct trainer
run_rc ok --trainer exec --train-cmd "$(tr_tmpl)" --steps 6 --save-at 3 --out "$T/ok" --progress off
expect_rc 0 "correct trainer's run" ok
bisect_rc ok
[ "$rc" = 0 ] || fail "bisect of the identical run: exit $rc, want 0"
contains "$T/ok.b.out" "nothing to bisect"
[ -e "$T/ok/bisect" ] && fail "bisect replayed an identical run"
json_true "$T/ok.bisect.json" "d['verdict'] == 'no-divergence' and d['first_event'] is None and d['exit_code'] == 0" "ok bisect JSON"

# the bug
run_rc bug --trainer exec --train-cmd "$(tr_tmpl --bug stale-buffer)" --steps 6 --save-at 3 --out "$T/bug" --progress off
expect_rc 1 "stale buffer's run" bug
bisect_rc bug
[ "$rc" = 1 ] || { fail "bisect of the stale-buffer run: exit $rc, want 1"; cat "$T/bug.b.out" "$T/bug.b.err" >&2; }
contains "$T/bug.b.out" "loaded state: save@3's checkpoint iter_0000003"
contains "$T/bug.b.out" "compared with through@3's: identical"
contains "$T/bug.b.out" "traces: each replay's trace is its leg's in the run, step for step"
contains "$T/bug.b.out" "located: step 4, microbatch 0, forward blocks/0/attn call 0: fp_out differs"
contains "$T/bug.b.out" "same input (fp_in), different output"
contains "$T/bug.b.out" "RC_EVENTS=$T/bug/bisect/through.events RC_EVENTS_FROM_STEP=4"
# the modules before it agree: the embedding and the attn's own projection
grep -A2 "forward blocks/0/attn/proj call 0" "$T/bug.b.out" | grep -q "^    resume" || fail "the context does not list blocks/0/attn/proj before the answer"
J="$T/bug.bisect.json"
json_true "$J" "d['verdict'] == 'located' and d['cause']['kind'] == 'operation' and d['cause']['step'] == 4" "cause"
json_true "$J" "all(e['kind'] == 'forward' and e['name'] == 'blocks/0/attn' and e['step'] == 4 and e['call'] == 0 for e in (d['first_event']['through'], d['first_event']['resume']))" "first_event names blocks/0/attn's forward at step 4"
json_true "$J" "d['first_event']['differing_fields'] == ['fp_out'] and d['step_state']['differing_fields'] == []" "only fp_out differs; the step_state agrees"
json_true "$J" "d['replay']['through']['saves'] == [3, 4] and d['replay']['resume']['saves'] == [4]" "replay saves"
for side in through resume; do
  head -1 "$T/bug/bisect/$side.events" | grep -q "^step=4 mb=-1 kind=step_state lr=" || fail "$side.events does not start with step 4's step_state"
done
finish
