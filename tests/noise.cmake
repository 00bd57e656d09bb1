# noise.cmake — `run --noise calibrated` (docs/design.md §7.2): a resume
# verdict for trainers that are not bitwise deterministic, the CPU core's
# nondeterministic kernel switch (RC_CPU_SUM_ORDER=shuffled) it is tested
# with, and exec trainers (numpy, PyTorch) whose sums take an order drawn
# per process. bench/bench_noise.sh has the measurements (>= 30 clean
# configurations, >= 100 clean A/A pairs, each catalogue bug).
rc_add_c_test(noise_unit test_calibrate.c)
foreach(t noise_cpu_switch noise_run)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
set_tests_properties(noise_run PROPERTIES TIMEOUT 600)
# exec trainers in Python: numpy (quick) and PyTorch (a torch import a leg)
find_program(RC_PYTHON3_NOISE NAMES python3)
foreach(t noise_exec noise_exec_torch)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 600 ENVIRONMENT
                       "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3_NOISE}")
endforeach()
