# dist.cmake — data parallel (src/dist, src/core/dist_optimizer.c,
# docs/distributed.md). CPU tests use MPI and skip (77) without it; GPU tests
# skip without a GPU, NCCL or enough GPUs.
rc_add_c_test(dist_unit test_dist.c)
foreach(t dist_mpi_run dist_rng_replicated dist_world_mismatch dist_external_launch dist_single_bytes
          dist_nccl dist_early_checks)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
