# mtp_lifecycle.cmake — the MTP lifecycle of seed 004 (docs/design.md §3.5): the loss's global
# denominators, detached MTP heads with their own clip, raw accumulation normalised at the
# finish. The flags, refusals, trace column, detachment and census (mtp_lifecycle.sh), and the
# float64 PyTorch cross-check of the new configurations (py_torch_crosscheck_mtp.sh). Their A/A,
# RESUME and catalogue tests are in catalogue.cmake (clean_loss_*, cause_mtp_*, cause_moe_aux_*),
# and the data-parallel one (two MPI ranks) here.
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
rc_add_sh_test(mtp_lifecycle mtp_lifecycle.sh)
rc_add_sh_test(py_torch_crosscheck_mtp py_torch_crosscheck_mtp.sh)
set_tests_properties(py_torch_crosscheck_mtp PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
rc_add_sh_test(dist_mtp_lifecycle dist_mtp_lifecycle.sh)
# the same configurations on the CUDA backend (skips without a GPU)
rc_add_sh_test(gpu_mtp_lifecycle gpu_mtp_lifecycle.sh)
set_tests_properties(gpu_mtp_lifecycle PROPERTIES TIMEOUT 900)
