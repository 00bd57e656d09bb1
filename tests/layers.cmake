# The build enforces the layers (CMakeLists.txt, layer_check_*): a scratch
# call from io or harness into the core fails to link the way those checks
# link (tests/layers_enforced.sh), and a call within the layers links.
set(RC_LINK_EXTRA "")
if(RC_SANITIZE)
  set(RC_LINK_EXTRA "-fsanitize=address,undefined")
endif()
add_test(NAME layers_enforced
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layers_enforced.sh ${CMAKE_C_COMPILER}
                 "$<JOIN:$<TARGET_OBJECTS:rc_io>,:>:$<JOIN:$<TARGET_OBJECTS:rc_base>,:>"
                 "$<JOIN:$<TARGET_OBJECTS:rc_harness>,:>:$<JOIN:$<TARGET_OBJECTS:rc_io>,:>:$<JOIN:$<TARGET_OBJECTS:rc_base>,:>"
                 "$<JOIN:${HDF5_C_LIBRARIES},:>:$<TARGET_FILE:OpenSSL::Crypto>:$<TARGET_FILE:ZLIB::ZLIB>"
                 "${RC_LINK_EXTRA}")
