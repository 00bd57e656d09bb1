#!/usr/bin/env bash
# bisect_exec_data_order.sh — `resumecheck bisect` on a PyTorch exec run whose
# sampler restarts its epoch on resume (tests/trainers/torch_bisect_trainer.py
# --bug data-order: the data position is restored, the data order is not).
# bisect names the step's batch event (logged by events.batch) as the first
# difference, at the same data position (samples=24 in both) with other
# data: an input of step 4, not a module's doing (cause resume-state, no
# module named), and points at the data order and the census. Negative
# control: the same run bisected with the trainer's batch event switched off
# (RC_TEST_NO_BATCH_EVENT=1, read by the test trainer) names a module, the
# embedding's forward (its input differs): the data verdict comes from the
# batch event, not from the shape of this run.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy h5py torch

tr_tmpl() {
  printf "'%s' '%s' --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg} %s" \
    "$PY" "$RC_SRC/tests/trainers/torch_bisect_trainer.py" "$*"
}
bisect_rc() { # NAME OUTNAME ARGS...
  local name=$1 o=$2
  shift 2
  "$RC_BIN" bisect "$T/$name" --json "$T/$o.json" "$@" >"$T/$o.out" 2>"$T/$o.err"
  rc=$?
}

run_rc bug --trainer exec --train-cmd "$(tr_tmpl --bug data-order)" --steps 6 --save-at 3 --out "$T/bug" --progress off
expect_rc 1 "data-order run" bug
bisect_rc bug data
[ "$rc" = 1 ] || { fail "bisect of the data-order run: exit $rc, want 1"; cat "$T/data.out" "$T/data.err" >&2; }
contains "$T/data.out" ">> #1 step 4, microbatch 0, batch"
contains "$T/data.out" "step 4, microbatch 0, batch: fp_data differs, but it is an input of the step (same data position, different samples: the sampler's state)"
contains "$T/data.out" "the data order after the resume is not the through process's"
contains "$T/data.out" "at the same data position, samples 24"
contains "$T/data.out" "state census at step 3"
lacks "$T/data.out" "located: step 4, microbatch 0, forward"
J="$T/data.json"
json_true "$J" "d['cause']['kind'] == 'resume-state' and d['cause']['event'] is None" "cause: the state the resumed process started from"
json_true "$J" "[e['kind'] for e in (d['first_event']['through'], d['first_event']['resume'])] == ['batch', 'batch'] and d['first_event']['through']['step'] == 4 and d['first_event']['through']['fields']['samples'] == d['first_event']['resume']['fields']['samples'] == '24' and d['first_event']['differing_fields'] == ['fp_data']" "first_event is the batch"
json_true "$J" "d['step_state']['differing_fields'] == []" "the step_state agrees"

# negative control: no batch event, and bisect names a module instead
RC_TEST_NO_BATCH_EVENT=1 bisect_rc bug nobatch
[ "$rc" = 1 ] || { fail "bisect without batch events: exit $rc, want 1"; cat "$T/nobatch.out" "$T/nobatch.err" >&2; }
contains "$T/nobatch.out" "located: step 4, microbatch 0, forward embed call 0: fp_in,fp_out differ"
lacks "$T/nobatch.out" "the data order"
json_true "$T/nobatch.json" "d['cause']['kind'] == 'operation' and d['first_event']['through']['kind'] == 'forward' and d['first_event']['through']['name'] == 'embed'" "without the batch event a module is named"
finish
