# wheel.cmake — the Python wheel that carries the program (python/pyproject.toml,
# README "Start: my PyTorch trainer"): built with pip and scikit-build-core,
# repaired with auditwheel, installed into a fresh virtual environment and
# used there (tests/py_wheel.sh). Named py_* like the other tests that start
# Python and torch (the sanitizer pass of .ci/run leaves them out: the
# wheel's program is not the sanitized build's).
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
rc_add_sh_test(py_wheel py_wheel.sh)
# a build of the program (about 1-2 minutes on 2 cores from empty, its
# directory kept in this build tree), then two runs of three torch legs
set_tests_properties(py_wheel PROPERTIES TIMEOUT 900 ENVIRONMENT
  "RC_BIN=$<TARGET_FILE:resumecheck>;RC_SRC=${CMAKE_SOURCE_DIR};RC_BUILD_DIR=${CMAKE_BINARY_DIR};RC_PYTHON=${RC_PYTHON3}")
