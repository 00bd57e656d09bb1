# examples.cmake — the examples/ trainers a PyTorch team can copy (docs/pytorch.md,
# "Examples"), each through `run --trainer exec` in its own checkpoint format,
# correct and with each of its planted resume bugs: TorchTitan style
# (torch.distributed.checkpoint, FSDP2 on gloo), the Hugging Face Trainer's
# layout (torch.save files, safetensors) and Megatron-LM's torch_dist layout
# (DCP + common.pt). They need python3 with numpy, h5py, torch, torchdata and
# safetensors (.ci/install-python-deps) and fail without them. Each runs four
# `run`s at once (about a minute and a half of CPU on two cores, most of it
# torch's import in every leg).
find_program(RC_PYTHON3 NAMES python3)
if(NOT RC_PYTHON3)
  set(RC_PYTHON3 python3)
endif()
foreach(t example_titan example_hf example_megatron)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 900 ENVIRONMENT
                       "RC_BIN=$<TARGET_FILE:resumecheck>;RC_FIXTURES=${RC_FIXTURES};RC_SRC=${CMAKE_SOURCE_DIR};RC_PYTHON=${RC_PYTHON3}")
endforeach()
