# GPU tests: they skip (77) without a GPU.
rc_add_c_test(gpu_parity test_gpu_parity.c)
rc_add_sh_test(gpu_harness gpu_harness.sh)
