# bisect.cmake — tests of `resumecheck bisect` (harness/bisect*.c,
# src/cli/cmd_bisect.c; docs/bisect.md). The unit test aligns synthetic event
# logs; the shell tests bisect real CPU runs of 10 steps saved at 5.
rc_add_c_test(bisect_events test_bisect_events.c)
foreach(t bisect_seed bisect_aa bisect_loaded_state bisect_usage bisect_save_effect bisect_state_only
          bisect_prev_update bisect_census bisect_run_json)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()

# catalogue bugs (flags as in catalogue.cmake): the event each one changes first
function(rc_bisect_bug name bug kind field cause census)
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bisect_catalogue.sh ${bug} ${kind} ${field} ${cause} ${census} ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>")
endfunction()
rc_bisect_bug(bisect_rng_not_saved rng-not-saved dropout offset resume-state rng.offset --dropout 0.1)
rc_bisect_bug(bisect_data_position_not_saved data-position-not-saved batch samples resume-state
              data.consumed_samples)
rc_bisect_bug(bisect_optimizer_step_not_saved optimizer-step-not-saved optimizer bc1 resume-state
              optimizer.step)
rc_bisect_bug(bisect_scheduler_not_restored scheduler-not-restored optimizer lr resume-state
              scheduler.num_steps)
rc_bisect_bug(bisect_grad_buffer_not_zeroed grad-buffer-not-zeroed-after-load backward fp_main_grad
              operation -)

# exec runs (docs/bisect.md "PyTorch trainers"): a PyTorch trainer's bugs
# bisected to a module's forward or to its data (python3 with numpy, h5py
# and torch, as tests/python.cmake; each test runs legs that import torch),
# and a copied run directory and a concurrent bisect (the fake trainer)
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
foreach(t bisect_exec_stale_buffer bisect_exec_data_order bisect_exec_copy bisect_exec_lock)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT
                       "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
endforeach()
set_tests_properties(bisect_exec_stale_buffer bisect_exec_data_order PROPERTIES TIMEOUT 600)
