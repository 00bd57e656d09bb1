# hostile.cmake — the CLI against hostile and careless use (issue 16): report
# writers on FIFOs, devices and symlinks, configs too large for the machine,
# duplicate flags, --help exit codes. Test prefix: hostile_.
rc_add_sh_test(hostile_cli hostile_cli.sh)
set_tests_properties(hostile_cli PROPERTIES TIMEOUT 300)
# the memory need of a config against what rc_model_init allocates (mallinfo2)
rc_add_c_test(hostile_model_memory test_model_memory.c)
# reliability, second round (issue 46): every subcommand's readers against a
# FIFO, a zero device and a symlink loop; the run-side weak cases (stale
# handoff notes, linked exec checkpoints, --out the legs cannot take,
# compare on a FIFO)
foreach(t hostile_readers hostile_run_weak)
  rc_add_sh_test(${t} ${t}.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 300)
endforeach()
