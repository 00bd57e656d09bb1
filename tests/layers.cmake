# The build enforces the layers (CMakeLists.txt, layer_check_*): a scratch
# call from io or harness into the core fails to link the way those checks
# link (tests/layers_enforced.sh), a call from the core into a leg fails
# the same way, and a call within the layers links.
set(RC_LINK_EXTRA "")
set(RC_LINK_LIBS ${HDF5_C_LIBRARIES})
if(RC_HAVE_MPI) # the core's objects include the MPI collectives
  list(APPEND RC_LINK_LIBS ${MPI_C_LIBRARIES})
endif()
if(RC_SANITIZE)
  set(RC_LINK_EXTRA "-fsanitize=address,undefined")
endif()
add_test(NAME layers_enforced
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layers_enforced.sh ${CMAKE_C_COMPILER}
                 "$<JOIN:$<TARGET_OBJECTS:rc_io>,:>:$<JOIN:$<TARGET_OBJECTS:rc_base>,:>"
                 "$<JOIN:$<TARGET_OBJECTS:rc_harness>,:>:$<JOIN:$<TARGET_OBJECTS:rc_io>,:>:$<JOIN:$<TARGET_OBJECTS:rc_base>,:>"
                 "$<JOIN:${RC_LINK_LIBS},:>:$<TARGET_FILE:OpenSSL::Crypto>:$<TARGET_FILE:ZLIB::ZLIB>"
                 "${RC_LINK_EXTRA}"
                 "$<JOIN:${RC_LAYER_OBJECTS_core},:>")
