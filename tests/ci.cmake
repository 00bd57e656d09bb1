# ci.cmake — what `run` does for CI systems beyond its reports
# (docs/ci.md): a JUnit file for a refused command line, the GitHub step
# summary, heartbeat lines in non-terminal logs. Test prefix: ci_.
foreach(t ci_junit_usage ci_step_summary ci_heartbeat)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
