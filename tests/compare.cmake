# compare.cmake — tests of `resumecheck compare` and the trace comparison
# (harness/compare*.c, harness/trace_diff.c, src/cli/cmd_compare.c).
rc_add_c_test(compare_unit test_compare.c)
# the state census comparison (harness/census.c, docs/census.md)
rc_add_c_test(census_unit test_census.c)

# What h5diff does with the same crafted pairs (docs/compare.md keeps the
# table; this test keeps the table true). Skips without h5diff.
add_test(NAME compare_h5diff
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/compare_h5diff.sh $<TARGET_FILE:compare_unit>)
set_tests_properties(compare_h5diff PROPERTIES SKIP_RETURN_CODE 77
                     ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>;RC_SRC=${CMAKE_SOURCE_DIR}")

# Files that are not HDF5: differing bytes counted in ranges; .npy, .npz and
# safetensors compared tensor by tensor; malformed headers are 65 (fixtures
# written by tests/compare_tensors_gen.py, no numpy needed).
rc_add_sh_test(compare_files_bytes compare_files_bytes.sh)
rc_add_sh_test(compare_files_malformed compare_files_malformed.sh)
set_tests_properties(compare_files_malformed PROPERTIES TIMEOUT 300)
# run's first differing dataset is described with compare's own detail
add_test(NAME compare_run_nan
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/compare_run_nan.sh $<TARGET_FILE:compare_unit>)
set_tests_properties(compare_run_nan PROPERTIES SKIP_RETURN_CODE 77
                     ENVIRONMENT "RC_BIN=$<TARGET_FILE:resumecheck>;RC_SRC=${CMAKE_SOURCE_DIR}")
# a hashes-only checkpoint (train --save-hashes-at) against a full one:
# decided by SHA-256, the full side's dataset hashes from its bytes
rc_add_sh_test(compare_hashes_only compare_hashes_only.sh)
