# python.cmake — the Python package (python/resumecheck, docs/pytorch.md):
# its unit tests, and examples/torch_train.py through `run --trainer exec`.
# They need python3 with numpy, h5py and torch (.ci/run installs them) and
# fail without them: a missing dependency is not a reason to pass.
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
foreach(t py_unit py_exec_torch py_exec_rng py_exec_stateful)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT
                       "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
endforeach()
# each leg imports torch (seconds of CPU): two runs of three legs
set_tests_properties(py_exec_torch py_exec_stateful PROPERTIES TIMEOUT 600)
# `python3 -m resumecheck compare-torch`: torch.save files and DCP
# directories through `compare` (docs/compare.md, "PyTorch formats")
rc_add_sh_test(py_compare_torch py_compare_torch.sh)
set_tests_properties(py_compare_torch PROPERTIES TIMEOUT 900 ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
# an exec trainer that checkpoints with torch.distributed.checkpoint (1 and 2
# ranks under torchrun), compared by content inside `run` and `compare`
# (harness/compare_torch.c): about a minute of legs per run
rc_add_sh_test(run_dcp run_dcp.sh)
set_tests_properties(run_dcp PROPERTIES TIMEOUT 900 ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
# the core's bf16 numerics against bench/torch_crosscheck.py (an independent
# autograd implementation, rounding where ops.h says), with its control
rc_add_sh_test(py_torch_crosscheck py_torch_crosscheck.sh)
set_tests_properties(py_torch_crosscheck PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
# checkpoints of two world sizes compared rank by rank, by name
rc_add_sh_test(compare_world_size compare_world_size.sh)
set_tests_properties(compare_world_size PROPERTIES ENVIRONMENT
                     "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
