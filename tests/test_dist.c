/* test_dist.c — unit tests of src/dist that need no second process: the
 * launcher environments (which variables win, what is refused), GPU
 * selection from a list, and the rank-order reductions over the
 * single-process transport (W = 1 must return the input bits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"

static int fails;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fails++;                                                                                     \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

static void clear_env(void) {
  const char *names[] = {"SLURM_PROCID",
                         "SLURM_NTASKS",
                         "SLURM_LOCALID",
                         "OMPI_COMM_WORLD_RANK",
                         "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK",
                         "RANK",
                         "WORLD_SIZE",
                         "LOCAL_RANK",
                         "CUDA_VISIBLE_DEVICES"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

static void test_env(void) {
  rc_dist_env env;
  rc_err err = {0};
  clear_env();
  CHECK(rc_dist_env_read(&env, &err) == 0 && !env.external && env.world == 1,
        "no launcher: world 1");
  setenv("RANK", "1", 1), setenv("WORLD_SIZE", "4", 1), setenv("LOCAL_RANK", "1", 1);
  CHECK(rc_dist_env_read(&env, &err) == 0 && env.external && env.rank == 1 && env.world == 4 &&
            !strcmp(env.launcher, "env"),
        "torchrun-style variables");
  /* Slurm wins over RANK/WORLD_SIZE when both are set */
  setenv("SLURM_PROCID", "2", 1), setenv("SLURM_NTASKS", "3", 1), setenv("SLURM_LOCALID", "0", 1);
  CHECK(rc_dist_env_read(&env, &err) == 0 && env.rank == 2 && env.world == 3 &&
            env.local_rank == 0 && !strcmp(env.launcher, "slurm"),
        "slurm variables first");
  /* negative controls: a rank outside the world, a malformed value */
  setenv("SLURM_PROCID", "3", 1);
  CHECK(rc_dist_env_read(&env, &err) == RC_EXIT_USAGE && strstr(err.msg, "outside"),
        "rank >= world refused");
  setenv("SLURM_PROCID", "x1", 1);
  CHECK(rc_dist_env_read(&env, &err) == RC_EXIT_USAGE && strstr(err.msg, "SLURM_PROCID"),
        "malformed refused");
  clear_env();
  /* OpenMPI without a local rank variable: the local rank defaults to the rank */
  setenv("OMPI_COMM_WORLD_RANK", "1", 1), setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  CHECK(rc_dist_env_read(&env, &err) == 0 && env.local_rank == 1 &&
            !strcmp(env.launcher, "openmpi"),
        "openmpi variables");
  clear_env();
}

static void test_select_gpu(void) {
  clear_env();
  rc_dist_select_gpu(1);
  CHECK(!strcmp(getenv("CUDA_VISIBLE_DEVICES"), "1"), "unset: local rank");
  setenv("CUDA_VISIBLE_DEVICES", "4,5,6", 1);
  rc_dist_select_gpu(2);
  CHECK(!strcmp(getenv("CUDA_VISIBLE_DEVICES"), "6"), "list: the local rank's entry");
  setenv("CUDA_VISIBLE_DEVICES", "3", 1);
  rc_dist_select_gpu(1);
  CHECK(!strcmp(getenv("CUDA_VISIBLE_DEVICES"), "3"), "one bound GPU is left alone");
  clear_env();
}

static void test_single_reductions(void) {
  const rc_ops *ops = rc_cpu_ops();
  rc_comm *c = rc_comm_single(ops);
  rc_err err = {0};
  float in[5] = {1.5f, -0.0f, 3.25f, 1e-30f, -7.0f}, out[5] = {0}, scratch[5];
  CHECK(rc_comm_reduce_scatter_sum(c, ops, in, out, scratch, 5, &err) == 0, "reduce-scatter");
  CHECK(!memcmp(in, out, sizeof in), "W=1 reduce-scatter returns the input bits (-0.0 included)");
  float buf[5];
  memcpy(buf, in, sizeof buf);
  CHECK(rc_comm_all_reduce_sum(c, ops, buf, scratch, 5, &err) == 0 && !memcmp(in, buf, sizeof in),
        "W=1 all-reduce returns the input bits");
  double d[2] = {0.1, 2.0};
  CHECK(rc_comm_sum_doubles_host(c, ops, d, 2, &err) == 0 && d[0] == 0.1 && d[1] == 2.0,
        "sum of doubles");
  CHECK(rc_comm_agree(c, ops, 0, &err) == 0, "agree: success");
  err.code = RC_EXIT_DATAERR;
  CHECK(rc_comm_agree(c, ops, RC_EXIT_DATAERR, &err) == RC_EXIT_DATAERR, "agree: own failure kept");
  CHECK(c->broadcast(c, buf, sizeof buf, 1, &err) != 0,
        "broadcast from a root outside the world refused");
  c->destroy(c);
}

int main(void) {
  test_env();
  test_select_gpu();
  test_single_reductions();
  if (fails) {
    fprintf(stderr, "%d check(s) failed\n", fails);
    return 1;
  }
  printf("ok\n");
  return 0;
}
