# cuda.cmake — the CUDA backend (kernels/) against the CPU reference, op by
# op: tolerances, bitwise promises, run-to-run determinism and the GEMM's
# fused-accumulation property. Exits 77 (SKIP) without a usable GPU or in a
# build without CUDA. The executable is test_cuda_ops; the test is cuda_ops.
add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/test_cuda_ops.c)
target_link_libraries(test_cuda_ops PRIVATE rc)
target_include_directories(test_cuda_ops PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME cuda_ops COMMAND test_cuda_ops)
set_tests_properties(cuda_ops PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT "${RC_TEST_ENV}")
# The same checks on the other paths an H100/H200 has: the mma.sync BF16
# attention where Hopper's wgmma kernels would run by default
# (RC_CUDA_ATTENTION=mma, kernels/cuda_attention_wgmma.cu) and the expert
# GEMMs one cuBLASLt call each where the CUTLASS grouped kernel would
# (RC_CUDA_GROUPED_GEMM=cublas, kernels/cuda_gemm_grouped.cu), so both paths
# of each stay tested. Which path ran: gpu_attention_path, gpu_gemm_pins.
add_test(NAME cuda_ops_mma COMMAND test_cuda_ops)
set_tests_properties(cuda_ops_mma PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                     ENVIRONMENT "${RC_TEST_ENV};RC_CUDA_ATTENTION=mma;RC_CUDA_GROUPED_GEMM=cublas")

# The CPU twin: this same program with the CPU backend in the GPU's place
# (--cpu-twin, the small shapes). It runs everywhere, CI included, so a
# change to a check's set-up (a buffer reused, a reference computed from the
# wrong input) fails here, on the CPU, before any GPU runs it; what it
# cannot show (the GPU kernels' own numbers) is what cuda_ops checks on a
# device. Its negative control is the bug it was written for: the 16-bit
# RoPE case writing its reference heads into the buffer the attention case
# reads (docs/cuda-backend.md, "The CPU twin").
add_test(NAME cuda_ops_cpu_twin COMMAND test_cuda_ops --cpu-twin)
set_tests_properties(cuda_ops_cpu_twin PROPERTIES TIMEOUT 600 ENVIRONMENT "${RC_TEST_ENV}")
