# robust.cmake — robustness tests (issue #10, docs/robustness.md): hash
# before parse, crash-safe saves, interrupted runs, one run per directory,
# resources, fuzzing, sanitizers. Test prefix: robust_.
rc_add_sh_test(robust_crash_save robust_crash_save.sh)
foreach(t robust_run_signals robust_run_lock robust_run_readonly)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
