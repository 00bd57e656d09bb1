# CPU backend tests: the bit-exact number formats, RNG and fingerprint of
# numeric.h, its portable log/sin/cos and the init draw against glibc, and
# every op of the CPU backend (the numerical reference).
rc_add_c_test(cpu_numeric test_numeric.c)
rc_add_c_test(cpu_init_math test_init_math.c)
rc_add_c_test(cpu_ops test_cpu_ops.c)
rc_add_c_test(cpu_ops_check test_ops_check.c)
