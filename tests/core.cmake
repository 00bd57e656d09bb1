# Training core (CPU backend): gradients, the seed's mechanism, fusion arms,
# the fp8 cache, and the `train` CLI.
add_executable(test_core ${CMAKE_CURRENT_SOURCE_DIR}/test_core.c)
target_link_libraries(test_core PRIVATE rc)
foreach(mode gradcheck mechanism fusion-arms fp8-cache fp8-vs-bf16 aux-loss heads-order)
  add_test(NAME core_${mode} COMMAND test_core ${mode})
endforeach()
rc_add_sh_test(core_cli core_cli.sh)
rc_add_sh_test(cli_flags cli_flags.sh)
rc_add_sh_test(ckpt_resume ckpt_resume.sh)
# a load's dataset hashes checked beside the first steps, and still refused
rc_add_sh_test(ckpt_load_checks ckpt_load_checks.sh)
rc_add_sh_test(ckpt_golden ckpt_golden.sh)
# RC_PROFILE=ops: the per-op profiler's counts, and that it changes no byte
rc_add_c_test(ops_profile_unit test_ops_profile.c)
rc_add_sh_test(ops_profile_train ops_profile.sh)
rc_add_sh_test(core_cuda_module core_cuda_module.sh)
rc_add_sh_test(core_init_threads core_init_threads.sh)
rc_add_sh_test(core_swiglu_recompute core_swiglu_recompute.sh)
rc_add_sh_test(core_kernel_switches core_kernel_switches.sh)
# the flag facility's table features (aliases, suggestions, repeatable flags)
add_executable(test_flags ${CMAKE_CURRENT_SOURCE_DIR}/test_flags.c)
target_link_libraries(test_flags PRIVATE rc)
add_test(NAME cli_flags_unit COMMAND test_flags)
