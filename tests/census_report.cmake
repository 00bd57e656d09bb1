# census_report.cmake — `run`'s census and report (harness/census.c,
# run_checks.c, report_*.c; docs/census.md, docs/report-schema.md) driven
# by hand-made checkpoints, traces and censuses through the fixture trainer
# (tests/trainers/fixture_trainer.sh, tests/census_fixture.py, which writes
# the checkpoints with the Python package: numpy and h5py, no torch).
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
foreach(t run_census_first_step run_census_silent run_census_robust run_report_first_cause
          run_report_aa_names)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT
                       "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
endforeach()
