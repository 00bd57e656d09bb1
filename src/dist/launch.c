/* launch.c — `train --world-size W` without an external launcher: start the
 * W ranks on this machine and wait for them (docs/distributed.md).
 *
 *   mpi  (CPU backend): runs `mpiexec -n W` on this same command line; MPI's
 *        own launcher wires the processes together.
 *   nccl (CUDA backend): forks W children of this process, each with
 *        RANK/WORLD_SIZE/LOCAL_RANK set exactly as an external launcher
 *        would, and a fresh rendezvous file under --out, so the local and
 *        the cluster paths are one code path.
 * The launcher's exit code is the first failing rank's (children still
 * running are then stopped: they would wait for the failed rank forever). */
#include "dist/launch.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return RC_EXIT_SOFTWARE;
}

/* argv of a rank: self, "train", the leg's flags, extra flags. */
static char **rank_argv(const char *self, int argc, char **argv, const char *const *extra,
                        int n_extra, const char *const *pre, int n_pre) {
  char **v = calloc((size_t)(n_pre + argc + n_extra + 3), sizeof *v);
  if (!v) abort();
  int k = 0;
  for (int i = 0; i < n_pre; i++) v[k++] = (char *)pre[i];
  v[k++] = (char *)self;
  v[k++] = "train";
  for (int i = 1; i < argc; i++) v[k++] = argv[i];
  for (int i = 0; i < n_extra; i++) v[k++] = (char *)extra[i];
  v[k] = NULL;
  return v;
}

static int self_path(char *buf, size_t cap, rc_err *err) {
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  if (n <= 0)
    return rc_fail(err, RC_EXIT_SOFTWARE, "cannot find this executable: %s", strerror(errno));
  buf[n] = 0;
  return 0;
}

#ifdef RC_HAVE_MPI
static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb, (void)type, (void)ftw;
  remove(path);
  return 0;
}

static void remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
#endif

static int launch_mpi(int world, int argc, char **argv, rc_err *err) {
#ifndef RC_HAVE_MPI
  (void)argc, (void)argv;
  return rc_fail(err, RC_EXIT_UNTESTABLE,
                 "--world-size %d on the CPU backend needs MPI, and this build has none "
                 "(install libopenmpi-dev openmpi-bin and rebuild)",
                 world);
#else
  char self[4096], n[16];
  if (self_path(self, sizeof self, err)) return err->code;
  snprintf(n, sizeof n, "%d", world);
  /* more ranks than cores is fine for correctness (CI has 2 cores); root
   * inside containers is common; no binding, so oversubscribed ranks share */
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0); /* containers forbid CMA */
  /* A private session directory per launch: legs start their mpiexec
   * concurrently, and OpenMPI's shared default under /tmp was seen to fail
   * orte_init ("orte_session_dir failed") when they collide. */
  char session[] = "/tmp/rc-ompi-XXXXXX";
  bool own_session = !getenv("OMPI_MCA_orte_tmpdir_base") && mkdtemp(session);
  if (own_session) {
    setenv("OMPI_MCA_orte_tmpdir_base", session, 1);
    setenv("OMPI_MCA_prte_tmpdir_base", session, 1); /* OpenMPI 5 */
  }
  const char *pre[] = {RC_MPIEXEC, "-n", n};
  char **v = rank_argv(self, argc, argv, NULL, 0, pre, 3);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    free(v);
    return rc_fail(err, RC_EXIT_SOFTWARE, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    execv(RC_MPIEXEC, v);
    fprintf(stderr, "resumecheck: cannot run %s: %s\n", RC_MPIEXEC, strerror(errno));
    _exit(RC_EXIT_UNTESTABLE);
  }
  free(v);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return rc_fail(err, RC_EXIT_SOFTWARE, "waitpid: %s", strerror(errno));
  if (own_session) remove_tree(session);
  int rc = exit_code(status);
  if (rc)
    return rc_fail(err, rc,
                   "%d-rank job (mpiexec) failed with exit code %d; see the ranks' messages above",
                   world, rc);
  return 0;
#endif
}

static int launch_children(int world, int argc, char **argv, const char *rendezvous, rc_err *err) {
  char self[4096];
  if (self_path(self, sizeof self, err)) return err->code;
  const char *extra[] = {"--rendezvous", rendezvous};
  bool has_rdv = false;
  for (int i = 1; i < argc; i++) has_rdv |= !strcmp(argv[i], "--rendezvous");
  char **v = rank_argv(self, argc, argv, extra, has_rdv ? 0 : 2, NULL, 0);
  pid_t *pids = calloc((size_t)world, sizeof *pids);
  if (!pids) abort();
  fflush(NULL);
  int rc = 0, started = 0;
  for (int r = 0; r < world; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      rc = rc_fail(err, RC_EXIT_SOFTWARE, "fork: %s", strerror(errno));
      break;
    }
    if (pid == 0) {
      char buf[16];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("RANK", buf, 1);
      setenv("LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", world);
      setenv("WORLD_SIZE", buf, 1);
      execv(self, v);
      _exit(RC_EXIT_SOFTWARE);
    }
    pids[started++] = pid;
  }
  free(v);
  /* wait for all; on the first failure stop the rest (our own children) */
  int running = started;
  while (running > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int who = -1;
    for (int r = 0; r < started; r++)
      if (pids[r] == pid) who = r;
    if (who < 0) continue;
    pids[who] = 0;
    running--;
    int code = exit_code(status);
    if (code && !rc) {
      rc = rc_fail(err, code, "rank %d of %d failed with exit code %d", who, world, code);
      for (int r = 0; r < started; r++)
        if (pids[r] > 0) kill(pids[r], SIGTERM);
    }
  }
  free(pids);
  return rc;
}

int rc_dist_launch_local(const char *kind, int world, int argc, char **argv, const char *rendezvous,
                         rc_err *err) {
  if (!strcmp(kind, "mpi")) return launch_mpi(world, argc, argv, err);
  if (!strcmp(kind, "nccl")) return launch_children(world, argc, argv, rendezvous, err);
  return rc_fail(err, RC_EXIT_USAGE, "--collectives %s cannot run %d ranks", kind, world);
}
