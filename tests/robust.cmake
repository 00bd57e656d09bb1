# robust.cmake — robustness tests (issue #10, docs/robustness.md): hash
# before parse, crash-safe saves, interrupted runs, one run per directory,
# resources, fuzzing, sanitizers. Test prefix: robust_.
rc_add_sh_test(robust_crash_save robust_crash_save.sh)
foreach(t robust_run_signals robust_run_lock robust_run_readonly hostile_legs hostile_legs_limits)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
# hash before parse: every H5Fopen of the loader is counted (--wrap)
rc_add_c_test(robust_hash_before_parse test_robust_hash.c)
target_link_options(robust_hash_before_parse PRIVATE -Wl,--wrap=H5Fopen)
# libFuzzer targets (fuzz/), bounded time; skips without clang's fuzzer runtime
rc_add_sh_test(robust_fuzz robust_fuzz.sh)
set_tests_properties(robust_fuzz PROPERTIES TIMEOUT 600)
rc_add_sh_test(robust_valgrind_train robust_valgrind_train.sh)
set_tests_properties(robust_valgrind_train PROPERTIES TIMEOUT 600)
# hostile compare/inspect inputs (issue 16): flipped shard byte, sparse 1 TiB, --ignore '*', garbage shard
rc_add_sh_test(hostile_compare hostile_compare.sh)
# reliability, second round (issue 46): a deferred save's note removed while
# it waits; signals during --save-at auto's fp16 probe; what an exec trainer
# leaves running when its leg ends
foreach(t robust_deferred_note robust_auto_probe robust_leg_descendants)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 300)
endforeach()
# allocation failures and memory limits (docs/robustness.md, "Allocation
# failures and memory limits"): train and run under ulimit -v / -d, and a
# forced failure at chosen allocations of init and of a step (exit 75 each)
foreach(t robust_alloc_limits robust_alloc_fail_at)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 300)
endforeach()
