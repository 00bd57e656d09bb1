# io tests: JSON, fsutil, shards, manifests, validated loads (owner: io).
rc_add_c_test(io_json test_json.c)
