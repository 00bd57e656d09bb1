# GPU tests: they skip (77) without a GPU.
rc_add_c_test(gpu_parity test_gpu_parity.c)
rc_add_sh_test(gpu_harness gpu_harness.sh)
rc_add_sh_test(gpu_fp8_matrix gpu_fp8_matrix.sh)
rc_add_sh_test(gpu_gemm_pins gpu_gemm_pins.sh)
# compute-sanitizer on tiny steps, with planted-bug controls (sanitizer_control)
if(RC_HAVE_CUDA)
  add_executable(sanitizer_control ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer_control.cu)
  target_link_libraries(sanitizer_control PRIVATE CUDA::cudart)
  rc_add_sh_test(gpu_sanitizer gpu_sanitizer.sh)
  set_tests_properties(gpu_sanitizer PROPERTIES TIMEOUT 1200)
endif()
rc_add_sh_test(gpu_attention_path gpu_attention_path.sh)
# the CUDA nondeterministic switch (RC_CUDA_SUM_ORDER=atomic) under --noise calibrated
rc_add_sh_test(gpu_noise gpu_noise.sh)
set_tests_properties(gpu_noise PROPERTIES TIMEOUT 900)
# a PyTorch trainer's own GPU nondeterminism (index_add_ atomics, SDPA) under
# --noise calibrated; skips unless torch imports and sees a GPU. The same
# interpreter as noise.cmake's exec trainers (find_program caches it).
find_program(RC_PYTHON3_NOISE NAMES python3)
rc_add_sh_test(gpu_noise_torch gpu_noise_torch.sh)
set_tests_properties(gpu_noise_torch PROPERTIES TIMEOUT 900 ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3_NOISE}")
