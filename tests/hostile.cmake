# hostile.cmake — the CLI against hostile and careless use (issue 16): report
# writers on FIFOs, devices and symlinks, configs too large for the machine,
# duplicate flags, --help exit codes. Test prefix: hostile_.
rc_add_sh_test(hostile_cli hostile_cli.sh)
set_tests_properties(hostile_cli PROPERTIES TIMEOUT 300)
