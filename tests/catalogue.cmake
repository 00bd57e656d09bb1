# The resume-bug catalogue (docs/design.md §8): every injectable bug is detected with
# its documented signature; the seed's matrix gives its documented verdicts
# (docs/seed-matrix.md); correct configurations raise no false alarm.
function(rc_catalogue name rc step first)
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/catalogue.sh ${rc} ${step} ${first} ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>")
endfunction()

# fp16 that really overflows (docs/design.md §8): a 2^20 loss scale doubled every 2 clean
# steps overflows at steps 3, 4, 7, 8; the hysteresis (2) absorbs 3 and 7, halves at 4 and 8
set(RC_FP16_OVERFLOW --precision fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --hysteresis 2)

rc_catalogue(bug_rng_not_saved 1 6 loss --inject rng-not-saved --dropout 0.1)
rc_catalogue(bug_data_position_not_saved 1 6 loss --inject data-position-not-saved)
rc_catalogue(bug_optimizer_step_not_saved 1 6 fp_params --inject optimizer-step-not-saved)
rc_catalogue(bug_scheduler_not_restored 1 6 lr --inject scheduler-not-restored)
rc_catalogue(bug_loss_scaler_not_saved 1 6 grad_norm --inject loss-scaler-not-saved --precision fp16 --loss-scale-window 3)
rc_catalogue(bug_expert_bias_not_saved 1 6 loss --inject expert-bias-not-saved)
rc_catalogue(bug_amax_history_not_saved 1 6 loss --inject amax-history-not-saved --precision fp8)
rc_catalogue(bug_grad_buffer_not_zeroed_after_load 1 6 grad_norm --inject grad-buffer-not-zeroed-after-load)
rc_catalogue(bug_moments_saved_in_bf16 1 6 fp_params --inject moments-saved-in-bf16)
# A/A catches the injected reduction only where the two legs' shuffled float sums differ
# somewhere before K: each step's sums coincide now and then (tiny preset, measured: step 1 in
# 1 of 16 pairs), so over K steps the A/A misses with about that chance to the power K. K = 5
# missed once in an ASan CI run (then RESUME diverged at step 6: exit 1); K = 9 makes it negligible.
rc_catalogue(bug_nondeterministic_reduction 2 - - --inject nondeterministic-reduction --save-at 9)
# bugs that only fp16 overflow shows (the config without --inject: clean_fp16_overflow[_every])
rc_catalogue(bug_hysteresis_not_saved 1 5 grad_norm ${RC_FP16_OVERFLOW} --inject hysteresis-not-saved --save-at 3)
rc_catalogue(bug_hysteresis_not_saved_k7 1 9 grad_norm ${RC_FP16_OVERFLOW} --inject hysteresis-not-saved --save-at 7)
# ... invisible where the overflow pattern has just reset the tracker (the halving at 4, the
# growth before 5 is not reached: the tracker is back at --hysteresis)
rc_catalogue(bug_hysteresis_not_saved_unseen_k4 0 - - ${RC_FP16_OVERFLOW} --inject hysteresis-not-saved --save-at 4)
rc_catalogue(bug_hysteresis_not_saved_unseen_k5 0 - - ${RC_FP16_OVERFLOW} --inject hysteresis-not-saved --save-at 5)
rc_catalogue(bug_adam_step_from_iteration 1 6 fp_params ${RC_FP16_OVERFLOW} --inject adam-step-from-iteration)
rc_catalogue(bug_adam_step_from_iteration_k3 1 4 fp_optim ${RC_FP16_OVERFLOW} --inject adam-step-from-iteration --save-at 3)
# ... invisible before the first skipped step (3), and without overflow
rc_catalogue(bug_adam_step_from_iteration_unseen_k2 0 - - ${RC_FP16_OVERFLOW} --inject adam-step-from-iteration --save-at 2)
rc_catalogue(bug_adam_step_from_iteration_unseen_no_skip 0 - - --precision fp16 --loss-scale-window 3 --inject adam-step-from-iteration)
# --save-at auto catches each (with --warmup 0 the hysteresis bug is caught only at the
# probe's skipped step 3: none of 5, 6, 9 sees it); the configs without --inject pass
rc_catalogue(bug_hysteresis_not_saved_auto 1 5 grad_norm ${RC_FP16_OVERFLOW} --warmup 0 --inject hysteresis-not-saved --save-at auto)
rc_catalogue(bug_adam_step_from_iteration_auto 1 4 fp_optim ${RC_FP16_OVERFLOW} --inject adam-step-from-iteration --save-at auto)
rc_catalogue(bug_save_draws_rng_auto 1 4 loss --inject save-draws-rng --dropout 0.1 --save-at auto)
rc_catalogue(clean_fp16_overflow_auto 0 - - ${RC_FP16_OVERFLOW} --save-at auto)
rc_catalogue(clean_fp16_overflow_auto_no_warmup 0 - - ${RC_FP16_OVERFLOW} --warmup 0 --save-at auto)
rc_catalogue(clean_dropout_auto 0 - - --dropout 0.1 --save-at auto)
# the save itself changes state (the config without --inject: clean_dropout, clean_dropout_save_early)
rc_catalogue(bug_save_draws_rng 1 6 loss --inject save-draws-rng --dropout 0.1)
rc_catalogue(bug_save_draws_rng_k1 1 2 loss --inject save-draws-rng --dropout 0.1 --save-at 1)
# the seed itself, and its fix
rc_catalogue(seed_legacy_bf16_repeated 1 6 grad_norm --precision bf16 --mtp-depths 2 --mtp-repeated-layer --first-microbatch-policy legacy)

# the seed's matrix: precision x MTP layer x policy x fusion (expected RESUME verdicts)
foreach(prec bf16 fp8)
  foreach(layer repeated separate)
    if(layer STREQUAL "repeated")
      set(layer_flag --mtp-repeated-layer)
    else()
      set(layer_flag --mtp-separate-layers)
    endif()
    foreach(policy legacy untracked-none resolve always-false persist)
      foreach(fusion on off)
        set(rc 0)
        if(prec STREQUAL "bf16" AND layer STREQUAL "repeated" AND policy STREQUAL "legacy" AND fusion STREQUAL "on")
          set(rc 1)
        endif()
        if(prec STREQUAL "fp8" AND policy STREQUAL "always-false")
          set(rc 1)
        endif()
        rc_catalogue(matrix_${prec}_${layer}_${policy}_fusion_${fusion} ${rc} - -
                     --precision ${prec} ${layer_flag} --first-microbatch-policy ${policy} --grad-accum-fusion ${fusion})
      endforeach()
      # the arms comparison (--confirm-arm) flags cells that are wrong in every leg alike
      set(arms 0)
      if(layer STREQUAL "repeated" AND (policy STREQUAL "persist" OR (policy STREQUAL "legacy") OR (prec STREQUAL "fp8" AND policy STREQUAL "untracked-none")))
        set(arms 1)
      endif()
      if(prec STREQUAL "fp8" AND policy STREQUAL "always-false")
        set(arms 1) # the resume divergence itself fails the run
      endif()
      rc_catalogue(arms_${prec}_${layer}_${policy} ${arms} - - --confirm-arm
                   --precision ${prec} ${layer_flag} --first-microbatch-policy ${policy})
    endforeach()
  endforeach()
  rc_catalogue(matrix_${prec}_no_weight_cache_legacy 0 - - --precision ${prec} --mtp-repeated-layer --first-microbatch-policy legacy --no-weight-cache)
endforeach()

# no false alarms: correct configurations pass byte-identical
rc_catalogue(clean_fp32 0 - - --precision fp32)
rc_catalogue(clean_bf16 0 - - --precision bf16)
rc_catalogue(clean_fp16 0 - - --precision fp16 --loss-scale-window 3)
rc_catalogue(clean_fp16_overflow 0 - - ${RC_FP16_OVERFLOW})
rc_catalogue(clean_fp16_overflow_every 0 - - ${RC_FP16_OVERFLOW} --save-at every)
# ... and it does skip steps (negative control: clean_fp16's flags show none)
add_test(NAME fp16_overflow_skips COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fp16_overflow.sh
         ${RC_FP16_OVERFLOW} -- --precision fp16 --loss-scale-window 3)
set_tests_properties(fp16_overflow_skips PROPERTIES ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>")
rc_catalogue(clean_fp8 0 - - --precision fp8)
rc_catalogue(clean_dense 0 - - --moe-layers none)
rc_catalogue(clean_moe_softmax 0 - - --moe-layers 0,1 --moe-scoring softmax)
rc_catalogue(clean_dropout 0 - - --dropout 0.1)
rc_catalogue(clean_dropout_save_early 0 - - --dropout 0.1 --save-at 1)
rc_catalogue(clean_microbatches_1 0 - - --microbatches 1)
rc_catalogue(clean_microbatches_3 0 - - --microbatches 3)
rc_catalogue(clean_mtp_0 0 - - --mtp-depths 0 --mtp-separate-layers)
rc_catalogue(clean_mtp_1 0 - - --mtp-depths 1)
rc_catalogue(clean_mtp_3_repeated 0 - - --mtp-depths 3 --mtp-repeated-layer)
rc_catalogue(clean_mtp_3_separate 0 - - --mtp-depths 3 --mtp-separate-layers)
rc_catalogue(clean_te_output_head 0 - - --te-output-head)
rc_catalogue(clean_tied 0 - - --tie-embeddings)
rc_catalogue(clean_prompt 0 - - --prompt-len 4)
rc_catalogue(clean_save_early 0 - - --save-at 1)
rc_catalogue(clean_save_late 0 - - --save-at 9)
rc_catalogue(clean_save_chained 0 - - --save-at 3,6 --dropout 0.1)
# a chain still finds the seed's bug, one step after each resume
rc_catalogue(seed_chained 1 4 grad_norm --save-at 3,6 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy)
# the clean sweep: >= 50 distinct correct configurations, 0 false alarms, and a planted bug
# reported (tests/clean_sweep.sh)
add_test(NAME clean_sweep COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/clean_sweep.sh)
set_tests_properties(clean_sweep PROPERTIES ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>" TIMEOUT 900)

# The cause each bug's report names, not only its signature
# (tests/catalogue_cause.sh, docs/census.md, docs/bisect.md): a setting the
# resumed process rebuilt (the census's `derived` fields), an in-process
# copy not refreshed after the load (`copy` fields), a save that wrote a
# value its process does not hold (the census of what the save wrote), an
# update bisect now logs (expert_bias, scaler_update), a sampler left at its
# first epoch (same data position, different samples). Each runs its
# negative control: the same flags without --inject pass, and neither the
# census line nor bisect says any of it. (No ';' in an expectation: CMake
# would split it.)
function(rc_catalogue_cause name rc step first)
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/catalogue_cause.sh ${rc} ${step} ${first} ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>")
endfunction()
rc_catalogue_cause(cause_warmup_from_process_start 1 6 lr
  "census=first: scheduler.warmup_origin: through 0, resumed 5 (derived: the resumed process computes 5 where the through process computes 0, though the state they come from is identical"
  "bisect=operation:the learning rate differs"
  "bisect=operation:though the scheduler's step count is equal (6 in both)"
  -- --inject warmup-from-process-start)
rc_catalogue_cause(cause_min_lr_default_after_resume 1 6 lr
  "census=first: scheduler.min_lr: through 0.00029999999999999997, resumed 0 (derived: the resumed process computes 0"
  -- --inject min-lr-default-after-resume)
rc_catalogue_cause(cause_bias_correction_fp32_after_load 1 6 fp_params
  "census=first: optimizer.bias_correction1: through 0.46855899691581726, resumed 0.46855908632278442 (derived:"
  "bisect=operation:though the optimizer step count is equal (6 in both)"
  -- --inject bias-correction-fp32-after-load)
rc_catalogue_cause(cause_clip_grad_default_after_resume 1 6 fp_params
  "census=first: optimizer.clip_grad: through 0.5, resumed 1 (derived:"
  -- --inject clip-grad-default-after-resume --clip-grad 0.5)
rc_catalogue_cause(cause_loss_scale_window_default_after_resume 1 7 grad_norm
  "census=first: loss_scaler.growth_interval: through 3, resumed 1000 (derived:"
  "bisect=previous-update:the loss scaler decided grow in the through process and count in the resumed one"
  -- --inject loss-scale-window-default-after-resume --precision fp16 --loss-scale-window 3)
rc_catalogue_cause(cause_expert_bias_device_copy_stale 1 6 loss
  "census=(copy: the device copy of moe.expert_bias.decoder/layers/1 is not the loaded value in the resumed process)"
  -- --inject expert-bias-device-copy-stale-after-load)
rc_catalogue_cause(cause_half_weight_copy_not_rebuilt 1 6 loss
  "census=(copy: the 16-bit copy of model.decoder/layers/0/self_attention/linear_qkv/weight is not the loaded value in the resumed process)"
  -- --inject half-weight-copy-not-rebuilt-after-load)
rc_catalogue_cause(cause_consumed_samples_saved_short 1 6 loss
  "census=first: data.consumed_samples: through 20, resumed 18 (saved: the save wrote 18, which differs from the saving process's 20"
  "census=the resumed process has what was saved)"
  "always=A/A@5            identical"
  -- --inject consumed-samples-saved-short)
# late-acting: the census at K sees nothing (the skip happens in step K+1); bisect names
# step K+1's expert_bias update, which the event log now holds
rc_catalogue_cause(cause_expert_bias_update_skipped_after_resume 1 7 loss
  "census=saved state identical"
  "bisect=previous-update:step 6, expert_bias decoder/layers/1: applied,fp_bias differ"
  "bisect=previous-update:the MoE expert-bias update of decoder/layers/1 ran in the through process and was skipped in the resumed one"
  -- --inject expert-bias-update-skipped-after-resume)
# epochs of 5 steps (20 samples, a global batch of 4): K = 5 ends the first
rc_catalogue_cause(cause_sampler_epoch_not_set_after_resume 1 6 loss
  "census=first: data.sampler_epoch: through 1, resumed 0 (derived:"
  "bisect=resume-state:same data position, different samples: the sampler's state"
  "bisect=resume-state:the through process's sampler is at epoch 1 and the resumed one's at epoch 0"
  -- --inject sampler-epoch-not-set-after-resume --epoch-samples 20)
# ... invisible at a K inside an epoch; --save-at auto adds the K that ends one (epochs of 7
# steps: 7, which none of 3, 5, 6, 9 is)
rc_catalogue(bug_sampler_epoch_not_set_unseen_k4 0 - - --inject sampler-epoch-not-set-after-resume --epoch-samples 20 --save-at 4)
rc_catalogue_cause(cause_sampler_epoch_not_set_auto 1 8 loss
  "always=7 (last step of a data epoch)"
  "census=data.sampler_epoch: through 1, resumed 0"
  -- --inject sampler-epoch-not-set-after-resume --epoch-samples 28 --save-at auto)

# The MTP lifecycle (docs/design.md §3.5, seed 004): the loss's global denominators, detached
# MTP heads with their own clip, raw accumulation normalised at the finish. Correct
# configurations are byte-identical in A/A and RESUME (the control of each bug below is its
# config without --inject, which catalogue_cause.sh runs), and each setting a resumed process
# can rebuild wrongly is named by the census's derived field at K.
set(RC_SEQ_DETACHED --loss-type sequence-level --mtp-detach-heads)
rc_catalogue(clean_loss_token_level 0 - - --loss-type token-level)
rc_catalogue(clean_loss_per_token_finish 0 - - --calculate-per-token-loss)
rc_catalogue(clean_loss_sequence_detached 0 - - ${RC_SEQ_DETACHED} --mtp-clip-grad 0.02)
rc_catalogue(clean_loss_sequence_detached_finish 0 - - ${RC_SEQ_DETACHED} --loss-normalize-at finish --moe-aux-loss-coeff 0)
rc_catalogue(clean_mtp_detached_separate 0 - - --mtp-detach-heads --mtp-depths 3 --mtp-separate-layers --dropout 0.1)
rc_catalogue(clean_loss_per_token_fp16_overflow 0 - - ${RC_FP16_OVERFLOW} --calculate-per-token-loss --mtp-detach-heads --save-at auto)
rc_catalogue(clean_loss_sequence_detached_chained 0 - - ${RC_SEQ_DETACHED} --microbatches 3 --save-at 3,6 --tie-embeddings)
# the MTP term over the main loss's count (sequences) after a load: the detached heads' gradient
# alone changes, so mtp_grad_norm is the first column; at either normalisation order
rc_catalogue_cause(cause_mtp_denominator_from_main_after_resume 1 6 mtp_grad_norm
  "census=first: mtp.loss_denominator: through tokens, resumed sequences (derived:"
  "bisect=operation:backward output_layer call 1: fp_out differs"
  -- --inject mtp-denominator-from-main-after-resume ${RC_SEQ_DETACHED})
rc_catalogue(bug_mtp_denominator_from_main_finish 1 6 mtp_grad_norm --inject mtp-denominator-from-main-after-resume
  ${RC_SEQ_DETACHED} --loss-normalize-at finish --moe-aux-loss-coeff 0)
# the load-balancing loss over the main loss's count: the decoder's MoE router moves the
# backbone's norm first
rc_catalogue_cause(cause_moe_aux_loss_main_denominator_after_resume 1 6 grad_norm
  "census=first: moe.aux_loss_denominator: through tokens, resumed sequences (derived:"
  "bisect=operation:transformer_layer/mlp/router call 1: fp_out,fp_main_grad differ"
  -- --inject moe-aux-loss-main-denominator-after-resume ${RC_SEQ_DETACHED})
# the MTP clip from its default: the norms are equal (taken before the clip), the update is not
rc_catalogue_cause(cause_mtp_clip_grad_default_after_resume 1 6 fp_params
  "census=first: mtp.clip_grad: through 0.02, resumed 1 (derived:"
  "bisect=operation:the MTP heads' clip differs"
  -- --inject mtp-clip-grad-default-after-resume --mtp-detach-heads --mtp-clip-grad 0.02)
