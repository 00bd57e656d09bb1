# bench.cmake — the benchmark tools that run without a GPU: the variant
# builder (bench/build_variants.sh) against this build's CUDA module. Test
# prefix: bench_.
add_test(NAME bench_build_variants COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench_build_variants.sh)
set_tests_properties(bench_build_variants PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT
  "RC_SRC=${CMAKE_SOURCE_DIR};RC_BUILD_DIR=${CMAKE_BINARY_DIR};RC_HAVE_CUDA=${RC_HAVE_CUDA}")
