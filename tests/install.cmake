# install.cmake — `cmake --install` into a temporary prefix, then the
# installed tree used as a user would (README "Install"): the program, its
# version, a short run, the man page, the bash completion, the CUDA module's
# place. Test prefix: install_.
add_test(NAME install_tree COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install.sh)
set_tests_properties(install_tree PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT
  "RC_BIN=$<TARGET_FILE:resumecheck>;RC_SRC=${CMAKE_SOURCE_DIR};RC_BUILD_DIR=${CMAKE_BINARY_DIR};RC_CMAKE=${CMAKE_COMMAND};RC_HAVE_MAN=${RC_HAVE_MAN};RC_HAVE_CUDA=${RC_HAVE_CUDA}")
