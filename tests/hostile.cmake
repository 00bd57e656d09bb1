# hostile.cmake — the CLI against hostile and careless use (issue 16): report
# writers on FIFOs, devices and symlinks, configs too large for the machine,
# duplicate flags, --help exit codes. Test prefix: hostile_.
rc_add_sh_test(hostile_cli hostile_cli.sh)
set_tests_properties(hostile_cli PROPERTIES TIMEOUT 300)
# the memory need of a config against what rc_model_init allocates (mallinfo2)
rc_add_c_test(hostile_model_memory test_model_memory.c)
