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

# No two source files of the library call each other, directly or around a
# circle (tests/file_cycles.py reads the objects' symbols); its self-test is
# the negative control: a scratch pair that calls both ways is reported.
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
add_test(NAME layers_no_file_cycles
         COMMAND ${RC_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/file_cycles.py "$<JOIN:${RC_ALL_OBJECTS},:>")
add_test(NAME layers_no_file_cycles_control
         COMMAND ${RC_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/file_cycles.py --self-test)
set_tests_properties(layers_no_file_cycles_control PROPERTIES ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
