/* leg.c — one training leg: build the model, optionally resume, train, write
 * the trace and the checkpoints.
 *
 * The trace holds only what must match between legs (docs/trace.md): wall
 * times go to timing.csv and run-specific facts to args.json, so equal runs
 * write byte-identical traces and shards.
 *
 * Order: everything that can refuse the leg comes before anything is
 * written (the --out lock, no complete checkpoint in the way); then the
 * backend and the model; then, pre-warmed (--wait-for-checkpoint), the wait
 * for the checkpoint to be complete; then the load. Waiting after the model
 * is built costs nothing in determinism: the model has trained nothing, its
 * process-local state is what a fresh process has. With --step-lock, each
 * step waits its turn on a shared GPU (base/steplock.h): that changes when a
 * step starts, never what it computes. */
#include "leg/leg.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda_module.h"
#include "backend/nvml_probe.h"
#include "backend/ops_profile.h"
#include "base/dirlock.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "base/kernel_switches.h"
#include "core/census.h"
#include "core/checkpointing.h"
#include "core/data.h"
#include "core/model.h"
#include "dist/comm.h"
#include "dist/launch.h"
#include "io/layout.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Start-up phases, timed in memory until timing.csv is open (docs/trace.md). */
enum { PH_EXEC = 0, PH_GATE, PH_BACKEND, PH_MODEL_INIT, PH_WAIT, PH_LOAD, PH_CENSUS, PH_N };
/* the CPU priority of legs off the critical path (nice(1) values) */
#define RC_BACKGROUND_NICE 10

static const char *const PHASE_NAMES[PH_N] = {"exec", "start_gate", "backend", "model_init",
                                              "wait", "load",       "census"};

/* Seconds since process `pid` (0: this one) started, from /proc/PID/stat
 * (field 22, clock ticks since boot) against CLOCK_BOOTTIME: for a `train`
 * not started by `run`, and for the writer of a handoff note. Tick
 * resolution (10 ms); -1 if unreadable (no such process). Thread-safe. */
static double process_age_s_of(pid_t pid) {
  char path[64];
  if (pid > 0)
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  else
    snprintf(path, sizeof path, "/proc/self/stat");
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p) return -1;
  unsigned long long start = 0;
  int field = 2;
  char *save = NULL;
  for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
    if (++field == 22) {
      start = strtoull(tok, NULL, 10);
      break;
    }
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec ts;
  if (field != 22 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts)) return -1;
  double age = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - (double)start / (double)hz;
  return age >= 0 ? age : -1;
}

static double process_age_s(void) {
  return process_age_s_of(0);
}

/* A descriptor `run` passes in the environment (RC_WAIT_FD, RC_DECIDE_FD);
 * -1 when absent or not one. */
static int env_fd(const char *name) {
  const char *v = getenv(name);
  char *end;
  long fd = v && *v ? strtol(v, &end, 10) : -1;
  return v && *v && !*end && fd >= 0 && fd < 1024 ? (int)fd : -1;
}

void rc_leg_proc_init(rc_leg_proc *proc) {
  memset(proc, 0, sizeof *proc);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  proc->t_main = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
  proc->t_spawn = -1;
  const char *v = getenv("RC_SPAWN_TIME");
  char *end;
  if (v && *v) {
    double t = strtod(v, &end);
    if (!*end && t > 0 && t <= proc->t_main) proc->t_spawn = t;
  }
  if (proc->t_spawn < 0) {
    double age = process_age_s();
    if (age >= 0) proc->t_spawn = proc->t_main - age;
  }
  proc->wait_fd = env_fd("RC_WAIT_FD");
  proc->decide_fd = env_fd("RC_DECIDE_FD");
}

/* The iteration a checkpoint directory name names (.../iter_0000005), -1 if
 * it names none (rc_model_load then says so). */
static long long iter_of(const char *dir) {
  char trimmed[1200];
  snprintf(trimmed, sizeof trimmed, "%s", dir);
  size_t n = strlen(trimmed);
  while (n > 1 && trimmed[n - 1] == '/') trimmed[--n] = 0;
  const char *base = strrchr(trimmed, '/');
  base = base ? base + 1 : trimmed;
  long long it;
  char tail;
  return sscanf(base, RC_ITER_PREFIX "%lld%c", &it, &tail) == 1 && it >= 0 ? it : -1;
}

/* Refuses, before anything is written, a leg whose --out already holds a
 * complete checkpoint it would save (the writer refuses too, but only after
 * the trace was truncated and the steps before it trained). */
static int check_outputs_free(const rc_leg_opts *leg, long long from, int last, rc_err *err) {
  for (int i = 0; i < leg->n_save_at; i++) {
    int k = leg->save_at[i];
    if (k <= from || k > last) continue;
    char path[1300];
    snprintf(path, sizeof path, "%s/" RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT "/" RC_COMPLETE_NAME,
             leg->out, (int64_t)k);
    if (rc_path_exists(path)) {
      path[strlen(path) - strlen("/" RC_COMPLETE_NAME)] = 0;
      return rc_fail(err, RC_EXIT_IOERR,
                     "refusing to overwrite the complete checkpoint %s (nothing was written; "
                     "choose another --out or remove it)",
                     path);
    }
  }
  return RC_OK;
}

/* The save that wrote a handoff note: its pid (from the note's temporary
 * file name, FILE.tmp.PID: the writer's own pid, io/handoff.c) and when the
 * note was written. A note whose writer is gone will never be followed by
 * COMPLETE: a hand-started --wait-for-checkpoint (no pipe from `run`) that
 * loaded it would otherwise wait for ever. */
typedef struct {
  pid_t pid;         /* 0: none to watch */
  double note_mtime; /* CLOCK_REALTIME seconds */
} note_writer;

static note_writer writer_of(const char *iter_dir, const rc_handoff *h) {
  note_writer w = {0, 0};
  const char *dot = strrchr(h->temp_file, '.');
  char *end;
  long pid = dot ? strtol(dot + 1, &end, 10) : 0;
  char path[1300];
  rc_handoff_path(path, sizeof path, iter_dir);
  struct stat st;
  if (pid > 0 && dot[1] && !*end && lstat(path, &st) == 0) {
    w.pid = (pid_t)pid;
    w.note_mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
  }
  return w;
}

/* Whether the note's writer has ended: no process of its pid, or one that
 * started after the note was written (the pid taken again by another
 * process; 1 s of slack for the clocks' resolutions). A writer in another
 * pid namespace cannot be seen: its note counts as stale. */
static bool writer_gone(const note_writer *w) {
  if (w->pid <= 0) return false;
  if (kill(w->pid, 0) != 0 && errno == ESRCH) return true;
  double age = process_age_s_of(w->pid);
  if (age < 0) return true; /* it ended between the two looks */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  double started = (double)now.tv_sec + now.tv_nsec * 1e-9 - age;
  return started > w->note_mtime + 1.0;
}

/* Test hook (docs/robustness.md), not a feature: RC_TEST_HANDOFF_TRUST_NOTE=1
 * takes a handoff note without looking at its writer, as before. */
static bool trust_note(void) {
  const char *v = getenv("RC_TEST_HANDOFF_TRUST_NOTE");
  return v && !strcmp(v, "1");
}

/* Pre-warmed resume: waits until iter_dir/COMPLETE exists or, when h is
 * not NULL, until the save hands the checkpoint over (its note, *handed
 * set: io/handoff.c). Ends at once, with a clear error, when the wait can
 * no longer succeed: `run` closed the pipe (the leg that writes the
 * checkpoint ended without it, or `run` ended however it ended: the kernel
 * closes the write end), or, without a pipe, the parent process went away,
 * or the save that wrote the note the leg loaded from (writer, NULL: none)
 * ended without COMPLETE; a note whose writer is already gone is stale and
 * refused the same way (66), never loaded.
 * announce: say on stderr that the leg waits. */
static int wait_for_checkpoint(const char *iter_dir, const rc_leg_proc *proc, rc_handoff *h,
                               bool *handed, const note_writer *writer, bool announce,
                               rc_err *err) {
  char marker[1300];
  snprintf(marker, sizeof marker, "%s/" RC_COMPLETE_NAME, iter_dir);
  pid_t parent = getppid();
  if (handed) *handed = false;
  bool check_writers = !trust_note();
  for (int tick = 0;; tick++) {
    if (rc_path_exists(marker)) return RC_OK;
    if (h) {
      int rc = rc_handoff_read(iter_dir, h, err);
      if (rc == RC_OK) {
        note_writer w = writer_of(iter_dir, h);
        if (check_writers && writer_gone(&w) && !rc_path_exists(marker)) {
          rc_handoff_free(h);
          return rc_fail(err, RC_EXIT_NOINPUT,
                         "the checkpoint %s that this leg waits for will not come: its handoff "
                         "note is stale (the save that wrote it, pid %ld, is gone without "
                         "COMPLETE); not loaded",
                         iter_dir, (long)w.pid);
        }
        *handed = true;
        return RC_OK;
      }
      if (rc != RC_EXIT_NOINPUT) return rc; /* a note that is not one: our writer's bug */
    }
    /* the writer of what was loaded, every 10th look (a /proc read) */
    if (check_writers && writer && tick % 10 == 9 && writer_gone(writer)) {
      if (rc_path_exists(marker)) return RC_OK; /* written just before it ended */
      return rc_fail(err, RC_EXIT_NOINPUT,
                     "the checkpoint %s that this leg waits for will not come: the save that "
                     "handed it over (pid %ld) ended without COMPLETE",
                     iter_dir, (long)writer->pid);
    }
    if (announce) {
      fprintf(stderr, "resumecheck train: waiting for %s (set-up done)\n", marker);
      announce = false;
    }
    bool give_up = false;
    if (proc->wait_fd >= 0) {
      struct pollfd pfd = {.fd = proc->wait_fd, .events = POLLIN};
      int r = poll(&pfd, 1, 20);
      if (r < 0 && errno != EINTR) give_up = true;
      if (r > 0) give_up = true; /* EOF or any byte: `run` says the checkpoint will not come */
    } else {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
      if (getppid() != parent) give_up = true;
    }
    if (give_up) {
      if (rc_path_exists(marker)) return RC_OK; /* written just before the producer ended */
      return rc_fail(err, RC_EXIT_NOINPUT,
                     "the checkpoint %s that this leg waits for will not come: %s", iter_dir,
                     proc->wait_fd >= 0 ? "the leg that writes it ended without it (or `run` ended)"
                                        : "the parent process ended");
    }
  }
}

/* A leg that loaded a handed-over checkpoint confirms it on a thread of
 * its own while it trains: it waits for COMPLETE as a pre-warmed leg waits
 * (the same end when the producer ends without it), then checks the
 * manifest against the note (rc_checkpoint_handoff_confirm). The leg
 * counts nothing before that: it joins the thread before its first save
 * and after its last step, and stops at the next step once the thread has
 * failed. */
typedef struct {
  const char *iter_dir;
  const rc_leg_proc *proc;
  const rc_handoff *h;
  note_writer writer; /* the save that wrote the note */
  pthread_t tid;
  bool started;
  atomic_int state; /* 0 running, 1 confirmed, 2 failed */
  int rc;
  rc_err err;
} handoff_confirm;

static void *confirm_run(void *arg) {
  handoff_confirm *c = arg;
  int rc = wait_for_checkpoint(c->iter_dir, c->proc, NULL, NULL, &c->writer, false, &c->err);
  if (!rc) rc = rc_checkpoint_handoff_confirm(c->iter_dir, c->h, &c->err);
  if (rc) rc_err_prefix(&c->err, "the checkpoint this leg loaded before it was durable");
  c->rc = rc;
  atomic_store(&c->state, rc ? 2 : 1);
  return NULL;
}

/* Joins the confirmation (once; nothing to do without one): its verdict,
 * *waited_s the seconds this thread blocked for it. */
static int confirm_join(handoff_confirm *c, double *waited_s, rc_err *err) {
  if (!c->started) return RC_OK;
  double t = now_s();
  pthread_join(c->tid, NULL);
  c->started = false;
  *waited_s += now_s() - t;
  if (c->rc) *err = c->err;
  return c->rc;
}

/* Test hook (docs/robustness.md), not a feature: RC_TEST_KILL_BEFORE_SAVE=LEG
 * makes the leg named LEG (--leg) die by SIGKILL just before its first save,
 * so that a test can kill a producer while a pre-warmed leg waits for it. */
static void test_kill_before_save(const rc_leg_opts *leg) {
  const char *v = getenv("RC_TEST_KILL_BEFORE_SAVE");
  if (v && *v && !strcmp(v, leg->leg)) raise(SIGKILL);
}

/* mtp_norm: the detached MTP heads' own gradient norm follows grad_norm
 * (docs/trace.md); left out otherwise, so other traces keep their columns */
static void trace_header(FILE *f, int D, bool mtp_norm) {
  fprintf(f, "step,loss,loss_hex");
  for (int k = 1; k <= D; k++) fprintf(f, ",mtp_loss_%d,mtp_loss_%d_hex", k, k);
  for (int k = 1; k <= D; k++) fprintf(f, ",mtp_acc_%d,mtp_acc_%d_hex", k, k);
  fprintf(f, ",grad_norm,grad_norm_hex");
  if (mtp_norm) fprintf(f, ",mtp_grad_norm,mtp_grad_norm_hex");
  fprintf(f, ",lr,lr_hex,loss_scale,loss_scale_hex,skipped,tokens,"
             "consumed_samples,fp_params,fp_main_grad,fp_optim\n");
}

static void trace_row(FILE *f, const rc_step_stats *s, int D, bool mtp_norm) {
  fprintf(f, "%lld,%.9g,%a", (long long)s->step, s->loss, s->loss);
  for (int k = 0; k < D; k++) fprintf(f, ",%.9g,%a", s->mtp_loss[k], s->mtp_loss[k]);
  for (int k = 0; k < D; k++) fprintf(f, ",%.9g,%a", s->mtp_acc[k], s->mtp_acc[k]);
  fprintf(f, ",%.9g,%a", s->grad_norm, s->grad_norm);
  if (mtp_norm) fprintf(f, ",%.9g,%a", s->mtp_grad_norm, s->mtp_grad_norm);
  fprintf(f, ",%.9g,%a,%.9g,%a,%d,%lld,%lld,%016llx,%016llx,%016llx\n", s->lr, s->lr, s->loss_scale,
          s->loss_scale, s->skipped, (long long)s->tokens, (long long)s->consumed_samples,
          (unsigned long long)s->fp_params, (unsigned long long)s->fp_main_grad,
          (unsigned long long)s->fp_optim);
}

/* One line per switch set, at leg start: the run's report does not carry
 * args.json, so the leg's log says it too. */
static void note_kernel_switches(const rc_ops *ops) {
  for (size_t i = 0; i < RC_N_KERNEL_SWITCHES; i++) {
    const char *v = getenv(RC_KERNEL_SWITCHES[i]);
    if (v)
      fprintf(stderr, "note: kernel switch %s=%s is set (recorded in args.json)%s%s%s\n",
              RC_KERNEL_SWITCHES[i], v,
              strcmp(ops->name, RC_KERNEL_SWITCH_BACKENDS[i]) ? "; the " : "",
              strcmp(ops->name, RC_KERNEL_SWITCH_BACKENDS[i]) ? ops->name : "",
              strcmp(ops->name, RC_KERNEL_SWITCH_BACKENDS[i]) ? " backend does not read it" : "");
  }
}

static char *args_json(const rc_leg_opts *leg, const rc_leg_proc *proc, const rc_ops *ops,
                       const rc_comm *comm, const rc_dist_env *env, int argc, char **argv) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "leg");
  rc_jw_str(&w, leg->leg);
  rc_jw_key(&w, "device");
  rc_jw_str(&w, ops->name);
  const rc_cuda_module *cuda = rc_cuda_module_loaded();
  if (cuda && !strcmp(ops->name, "cuda")) {
    rc_jw_key(&w, "cuda_module");
    rc_jw_str(&w, rc_cuda_module_path());
    rc_jw_key(&w, "cuda_device");
    rc_jw_str(&w, cuda->describe());
  }
  /* what was set, whatever the backend: a record of the environment */
  rc_jw_key(&w, "kernel_switches");
  rc_jw_obj_begin(&w);
  for (size_t i = 0; i < RC_N_KERNEL_SWITCHES; i++) {
    const char *v = getenv(RC_KERNEL_SWITCHES[i]);
    if (!v) continue;
    rc_jw_key(&w, RC_KERNEL_SWITCHES[i]);
    rc_jw_str(&w, v);
  }
  rc_jw_obj_end(&w);
  rc_jw_key(&w, "collectives");
  rc_jw_str(&w, comm ? comm->name : "none");
  if (comm) {
    rc_jw_key(&w, "collectives_settings");
    rc_jw_str(&w, comm->settings);
    rc_jw_key(&w, "world_size");
    rc_jw_int(&w, comm->world);
    rc_jw_key(&w, "launcher");
    rc_jw_str(&w, env->launcher);
  }
  if (proc->step_lock) { /* a fact of this process, like the pid: not in argv */
    rc_jw_key(&w, "step_lock");
    rc_jw_str(&w, proc->step_lock);
    rc_jw_key(&w, "step_priority");
    rc_jw_str(&w, rc_step_priority_name(proc->step_priority));
  }
  rc_jw_key(&w, "argv");
  rc_jw_arr_begin(&w);
  for (int i = 0; i < argc; i++) rc_jw_str(&w, argv[i]);
  rc_jw_arr_end(&w);
  struct utsname u;
  if (uname(&u) == 0) {
    rc_jw_key(&w, "host");
    rc_jw_str(&w, u.nodename);
  }
  rc_jw_key(&w, "pid");
  rc_jw_int(&w, getpid());
  rc_jw_key(&w, "unix_time");
  rc_jw_int(&w, (int64_t)time(NULL));
  rc_jw_obj_end(&w);
  return w.buf;
}

static bool in_list(const int *list, int n, int x) {
  for (int i = 0; i < n; i++)
    if (list[i] == x) return true;
  return false;
}

/* Which collectives this leg uses (docs/distributed.md). */
static const char *pick_collectives(const rc_config *cfg, const rc_leg_opts *leg, bool cpu) {
  if (strcmp(leg->collectives, "auto")) return leg->collectives;
  if (cfg->world_size == 1) return "none";
  return cpu ? "mpi" : "nccl";
}

/* Joins (or, for "none", skips) the job's collectives. */
static int open_comm(const char *kind, const rc_config *cfg, const rc_leg_opts *leg,
                     const rc_dist_env *env, const rc_ops *ops, rc_comm **comm, rc_err *err) {
  *comm = NULL;
  bool cpu = !strcmp(ops->name, "cpu");
  if (!strcmp(kind, "none")) {
    if (cfg->world_size > 1)
      return rc_fail(err, RC_EXIT_USAGE, "--collectives none needs --world-size 1");
    return 0;
  }
  if (!strcmp(kind, "single")) {
    if (cfg->world_size > 1)
      return rc_fail(err, RC_EXIT_USAGE, "--collectives single needs --world-size 1");
    *comm = rc_comm_single(ops);
    return 0;
  }
  if (!strcmp(kind, "mpi")) {
    if (!cpu)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--collectives mpi moves host memory: it needs --device cpu");
    return rc_comm_mpi_create(comm, cfg->world_size, err);
  }
  if (cpu) return rc_fail(err, RC_EXIT_USAGE, "--collectives nccl needs --device cuda");
  return rc_comm_nccl_create(comm, env->rank, cfg->world_size, env->local_rank, leg->rendezvous,
                             err);
}

/* Everything one leg holds while it runs, set up phase by phase and
 * released by leg_close whatever phase failed. Owned: the lock, the
 * backend's collectives, the data, the model, the output files, args. */
typedef struct {
  const rc_config *cfg;
  const rc_leg_opts *leg;
  const rc_leg_proc *proc;
  rc_step_lock *step_lock;
  rc_dist_env env;
  double phase_s[PH_N];
  int lock_fd;
  int last; /* the step the leg ends at */
  const rc_ops *ops;
  const char *profile_env; /* RC_PROFILE */
  bool profile_ops;
  rc_comm *comm;
  int rank;
  rc_data data;
  bool data_open;
  rc_model *m;
  FILE *trace, *timing;
  char *args;
  char ckpt_root[1200];
  /* pre-warmed: the checkpoint was handed over before it was durable */
  rc_handoff handoff;
  bool handed;
  handoff_confirm confirm;
  double confirm_wait_s;    /* blocked joining the confirmation */
  double deferred_wait_s;   /* deferred saves: waiting for `run`'s word */
  rc_err deferred_err;      /* a deferred save's wait that ended without a word */
  double load_check_wait_s; /* blocked for the load's dataset hashes */
} leg_state;

static void leg_close(leg_state *s) {
  /* a failed leg still waits for its confirmation thread, which ends with
   * COMPLETE or with the producer (`run` closes the wait pipe) */
  rc_err ignored;
  (void)confirm_join(&s->confirm, &s->confirm_wait_s, &ignored);
  rc_handoff_free(&s->handoff);
  if (s->trace) fclose(s->trace);
  if (s->m && s->m->events.file) fclose(s->m->events.file);
  free(s->args);
  /* the model's buffers (device memory, page-locked staging) go first and
   * are timed: a leg's end is on the run's critical path too */
  double t = now_s();
  if (s->m) rc_model_free(s->m);
  if (s->timing) {
    fprintf(s->timing, "teardown,,%.6f\n", now_s() - t);
    fclose(s->timing);
  }
  free(s->m);
  if (s->data_open) rc_data_close(&s->data);
  if (s->comm) s->comm->destroy(s->comm);
  if (s->lock_fd >= 0) close(s->lock_fd);
}

/* One writer per --out: this process, or the local launcher of its ranks.
 * Ranks of an external launcher share the launcher's --out and lock
 * nothing (docs/robustness.md). Then nothing this leg would write may be
 * in the way: refused before a byte is written. */
static int leg_claim_out(leg_state *s, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  if (s->env.external) return RC_OK;
  int rc;
  if ((rc = rc_mkdir_p(leg->out, err)) || (rc = rc_dir_lock(leg->out, "train", &s->lock_fd, err)))
    return rc;
  long long from = leg->resume_from[0] ? iter_of(leg->resume_from) : 0;
  return check_outputs_free(leg, from, s->last, err);
}

/* World size > 1 without an external launcher: this process is the local
 * launcher, not a rank. It has nothing to pre-warm, so it waits before it
 * starts them. */
static int leg_launch_ranks(leg_state *s, const char *kind, int argc, char **argv, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  if (s->proc->step_lock)
    fprintf(stderr,
            "note: --step-lock is not passed to the %d ranks of this leg (one GPU "
            "each): they step unscheduled\n",
            s->cfg->world_size);
  int rc;
  if (s->proc->wait_for_checkpoint &&
      (rc = wait_for_checkpoint(leg->resume_from, s->proc, NULL, NULL, NULL, true, err)))
    return rc;
  char rdv[1200];
  if (leg->rendezvous[0])
    snprintf(rdv, sizeof rdv, "%s", leg->rendezvous);
  else
    snprintf(rdv, sizeof rdv, "%s/.rendezvous.%ld", leg->out, (long)getpid());
  return rc_dist_launch_local(kind, s->cfg->world_size, argc, argv, rdv, err);
}

/* The backend --device names (auto: CUDA when a GPU and the module are
 * there, else the CPU with a note), its device memory checked against what
 * the config needs, the profiler wrapped around it, the collectives. */
static int leg_open_backend(leg_state *s, const char *kind, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  double t_phase = now_s();
  bool want_cpu = !strcmp(leg->device, "cpu");
  /* one GPU per rank: the launcher's local rank picks it, before CUDA starts */
  if (s->env.external && !want_cpu) rc_dist_select_gpu(s->env.local_rank);
  const char *why = NULL;
  if (want_cpu) {
    s->ops = rc_cpu_ops();
  } else if (!strcmp(leg->device, "auto") && !rc_cuda_gpu_visible()) {
    /* no GPU: the CUDA module is not even opened */
    fprintf(stderr, "note: --device auto: no NVIDIA GPU visible; using the CPU backend\n");
    s->ops = rc_cpu_ops();
  } else {
    s->ops = rc_cuda_ops(&why);
    if (!s->ops && !strcmp(leg->device, "auto")) {
      fprintf(stderr, "note: --device auto: %s; using the CPU backend\n", why ? why : "no GPU");
      s->ops = rc_cpu_ops();
    }
    if (!s->ops) return rc_fail(err, RC_EXIT_UNTESTABLE, "--device cuda: %s", why ? why : "no GPU");
  }
  if (s->env.rank == 0) note_kernel_switches(s->ops);
  /* the device's own memory, before the model allocates any (the CPU
   * backend's host memory is checked by rc_model_init) */
  const rc_cuda_module *cuda = rc_cuda_module_loaded();
  size_t dev_free = 0, dev_total = 0;
  int rc;
  if (!strcmp(s->ops->name, "cuda") && cuda && cuda->memory_info(&dev_free, &dev_total) == 0) {
    rc_memory_need need;
    rc_model_memory_need(s->cfg, &need);
    if ((rc = rc_model_memory_check(&need, false, dev_free, rc_host_memory_available(), err)))
      return rc;
  }
  /* RC_PROFILE=1: time per phase of the step. RC_PROFILE=ops: that, and every
   * op synchronised and timed by a wrapping table (backend/ops_profile.h),
   * installed before anything holds the ops so that everything goes through it */
  s->profile_env = getenv("RC_PROFILE");
  /* RC_PROFILE=events: the same op table, each op timed between marks on
   * the backend's stream instead of synchronised (backend/ops_profile.h) */
  bool events = s->profile_env && !strcmp(s->profile_env, "events");
  s->profile_ops = s->profile_env && (!strcmp(s->profile_env, "ops") || events);
  if (s->profile_ops) s->ops = events ? rc_ops_profiled_events(s->ops) : rc_ops_profiled(s->ops);
  if ((rc = open_comm(kind, s->cfg, leg, &s->env, s->ops, &s->comm, err))) return rc;
  s->rank = s->comm ? s->comm->rank : 0;
  s->phase_s[PH_BACKEND] = now_s() - t_phase;
  return RC_OK;
}

/* The data and the model, its staging buffer reserved; pre-warmed, the
 * wait for the checkpoint; then the load. A failed load starts no training
 * and writes nothing. */
static int leg_build_model(leg_state *s, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  const rc_leg_proc *proc = s->proc;
  double t_phase = now_s();
  int rc = rc_data_open(&s->data, s->cfg, err);
  if (rc) return rc;
  s->data_open = true;
  if (!(s->m = calloc(1, sizeof *s->m))) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  rc_model *m = s->m;
  rc = leg->resume_from[0] ? rc_model_init_for_load(m, s->cfg, s->ops, s->rank, err)
                           : rc_model_init(m, s->cfg, s->ops, s->rank, err);
  if (!rc && s->comm) rc = rc_model_attach_comm(m, s->comm, err);
  if (rc) return rc;
  s->ops->sync();
  s->phase_s[PH_MODEL_INIT] = now_s() - t_phase;
  /* the host buffer for saves and the load, reserved and page-locked while
   * the leg waits or trains (locking faulted-in huge pages takes the driver
   * 0.05-0.09 s for 2.5 GB: no longer a stall worth keeping from a training
   * leg). Not for a leg that loads right away: its load would only wait for
   * the pages one thread faults in, where the reading threads fault them in
   * together. */
  if (proc->wait_for_checkpoint || (!leg->resume_from[0] && leg->n_save_at > 0))
    rc_model_reserve_staging(m, true);
  /* pre-warmed: everything is set up; now the checkpoint must be complete */
  if (proc->wait_for_checkpoint) {
    t_phase = now_s();
    rc = wait_for_checkpoint(leg->resume_from, proc, &s->handoff, &s->handed, NULL, true, err);
    s->phase_s[PH_WAIT] = now_s() - t_phase;
    /* on the critical path from here: back to the normal CPU priority where
     * the system lets a process raise it again (root; otherwise it stays
     * as low as the legs it shares the host with) */
    if (proc->step_lock && proc->step_priority != RC_STEP_PRIORITY_LOW)
      (void)setpriority(PRIO_PROCESS, 0, 0);
    if (rc) return rc;
  }
  if (leg->resume_from[0]) {
    t_phase = now_s();
    rc = s->handed ? rc_model_load_handoff(m, leg->resume_from, &s->handoff, err)
                   : rc_model_load(m, leg->resume_from, err);
    s->ops->sync();
    s->phase_s[PH_LOAD] = now_s() - t_phase;
    if (rc) return rc;
    if (s->handed) {
      fprintf(stderr,
              "resumecheck train: loaded %s before it was durable (handed over); confirming "
              "against its manifest once COMPLETE is written\n",
              leg->resume_from);
      s->confirm = (handoff_confirm){.iter_dir = leg->resume_from,
                                     .proc = proc,
                                     .h = &s->handoff,
                                     .writer = writer_of(leg->resume_from, &s->handoff)};
      s->confirm.started = pthread_create(&s->confirm.tid, NULL, confirm_run, &s->confirm) == 0;
      if (!s->confirm.started) confirm_run(&s->confirm); /* no thread: confirm here */
      if (s->confirm.rc) {
        *err = s->confirm.err;
        return s->confirm.rc;
      }
    }
  }
  if (s->last <= m->iteration)
    return rc_fail(err, RC_EXIT_USAGE,
                   "nothing to do: the checkpoint is at step %lld and the leg ends at %d",
                   (long long)m->iteration, s->last);
  if (leg->resume_from[0]) {
    /* what this process holds before its first step (docs/census.md) */
    t_phase = now_s();
    if ((rc = rc_census_write(m, leg->out, NULL, err))) return rc;
    s->phase_s[PH_CENSUS] = now_s() - t_phase;
  }
  return RC_OK;
}

/* trace.csv (rank 0: it holds global quantities), timing.csv with the
 * start-up phases that ran, the event log, args.json's text. */
static int leg_open_outputs(leg_state *s, int argc, char **argv, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  char path[1200];
  int rc;
  if ((rc = rc_mkdir_p(leg->out, err))) return rc;
  rc_path_join(s->ckpt_root, sizeof s->ckpt_root, leg->out, RC_CKPT_DIR_NAME);
  rc_path_join(path, sizeof path, leg->out, RC_TRACE_NAME);
  s->trace = fopen(s->rank == 0 ? path : "/dev/null", "w");
  int open_errno = s->trace ? 0 : errno;
  rc_path_join(path, sizeof path, leg->out, RC_TIMING_NAME);
  s->timing = s->trace ? fopen(s->rank == 0 ? path : "/dev/null", "w") : NULL;
  if (s->trace && !s->timing) open_errno = errno;
  if (!s->trace || !s->timing)
    return rc_fail(err, RC_EXIT_IOERR, "cannot write %s/%s: %s", leg->out,
                   s->trace ? RC_TIMING_NAME : RC_TRACE_NAME, strerror(open_errno));
  trace_header(s->trace, s->m->D, s->m->cfg.mtp_detach_heads);
  /* phases first (those that ran), then one row per step and per save */
  fprintf(s->timing, "phase,step,seconds\n");
  for (int p = 0; p < PH_N; p++)
    if (s->phase_s[p] >= 0) fprintf(s->timing, "%s,,%.6f\n", PHASE_NAMES[p], s->phase_s[p]);
  if (leg->events[0] && s->rank == 0) {
    s->m->events.file = fopen(leg->events, "w");
    if (!s->m->events.file)
      return rc_fail(err, RC_EXIT_IOERR, "--events %s: cannot open for writing", leg->events);
    s->m->events.from_step = leg->events_from_step;
  }
  s->args = args_json(leg, s->proc, s->ops, s->comm, &s->env, argc, argv);
  return RC_OK;
}

/* The dataset hashes the load left to a thread (rc_model_load_checked):
 * joined, the seconds this thread blocked for them counted. */
static int load_checked(leg_state *s, rc_err *err) {
  double t = now_s();
  int rc = rc_model_load_checked(s->m, err);
  s->load_check_wait_s += now_s() - t;
  if (rc) rc_err_prefix(err, "the checkpoint this leg loaded (%s)", s->leg->resume_from);
  return rc;
}

/* Test hook (docs/robustness.md), not a feature: RC_TEST_DEFERRED_BLOCKING=1
 * waits for `run`'s word in one blocking read, as before the note was
 * watched, so that a test can show the wait hang when the note goes. */
static bool deferred_blocking(void) {
  const char *v = getenv("RC_TEST_DEFERRED_BLOCKING");
  return v && !strcmp(v, "1");
}

/* Whether the note at path is still the file this process wrote (same
 * device and inode): one removed, or replaced by another file, will never
 * be read by `run` as this leg's hashes. */
static bool note_still_there(const char *path, const struct stat *mine) {
  struct stat st;
  return lstat(path, &st) == 0 && st.st_dev == mine->st_dev && st.st_ino == mine->st_ino;
}

/* `train --save-deferred-at`: the state is staged and hashed; its hashes
 * go to ITER.deferred.json for `run`, whose word comes on RC_DECIDE_FD: 'H'
 * keeps hashes only, 'F' (or the pipe's end: `run` is gone, or stopped
 * the leg) writes the shard in full, as does a leg with no descriptor (run
 * by hand: a plain save). The wait is polled in slices of
 * DEFERRED_SLICE_MS, never one blocking read: between them the leg checks
 * that its note is still the file it wrote. A note that vanished (or was
 * replaced) can never be read by `run`, which would then wait for it while
 * this leg waits for `run`; so the wait ends at once with 65, and so does
 * 'X', `run`'s word that it saw the note vanish. Such a save keeps hashes
 * only (the cheaper end) and the leg fails after it (s->deferred_err). A
 * SIGTERM from `run` ends the wait, and the leg. */
enum { DEFERRED_SLICE_MS = 100 };

static bool decide_full(void *ctx, const char *iter_dir, int64_t iteration,
                        const rc_mf_shard *entry) {
  leg_state *s = ctx;
  int fd = s->proc->decide_fd;
  if (fd < 0) return true;
  rc_err e = {0};
  char note[4096];
  rc_deferred_path(note, sizeof note, iter_dir);
  struct stat mine;
  if (rc_deferred_note_write(iter_dir, iteration, entry, &e) || lstat(note, &mine) != 0) {
    fprintf(stderr, "resumecheck train: %s; writing the shard in full\n",
            e.code ? e.msg : "the deferred note is gone as soon as written");
    return true;
  }
  fprintf(stderr,
          "resumecheck train: step %" PRId64 " staged and hashed; waiting for run's word (the "
          "shard in full, or hashes only)\n",
          iteration);
  double t = now_s();
  char c = 'F';
  ssize_t r = -1;
  bool blocking = deferred_blocking(), gone = false;
  for (;;) {
    if (!blocking) {
      struct pollfd pfd = {.fd = fd, .events = POLLIN};
      int p = poll(&pfd, 1, DEFERRED_SLICE_MS);
      if (p < 0 && errno != EINTR) break; /* the descriptor is unusable: full */
      if (p <= 0) {
        if (!note_still_there(note, &mine)) {
          gone = true;
          break;
        }
        continue;
      }
    }
    r = read(fd, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  s->deferred_wait_s += now_s() - t;
  if (gone || (r == 1 && c == 'X')) {
    /* only what this process wrote is removed: a file put in its place is not ours */
    if (!gone && note_still_there(note, &mine)) rc_deferred_note_remove(iter_dir);
    rc_fail(&s->deferred_err, RC_EXIT_DATAERR,
            "the deferred save at step %" PRId64 " waited for run's word with its hashes in %s, "
            "and %s: run can no longer decide (something else removes files in this leg's "
            "directory); the save keeps hashes only and the leg fails",
            iteration, note,
            gone ? "that note was removed or replaced" : "run saw that note vanish");
    fprintf(stderr, "resumecheck train: %s\n", s->deferred_err.msg);
    return false;
  }
  rc_deferred_note_remove(iter_dir);
  bool full = !(r == 1 && c == 'H');
  fprintf(stderr, "resumecheck train: step %" PRId64 ": %s\n", iteration,
          full ? "writing the shard in full" : "keeping hashes only");
  return full;
}

/* A save step: the census before the save, the save (hashes only where
 * --save-hashes-at says so), the census after it — the state the next
 * step starts from, save-time side effects included, and before it, to
 * tell them apart; nothing resumes from the last step. */
static int leg_save(leg_state *s, int step, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  rc_step_lock_leave(s->step_lock); /* low legs may step while this one saves */
  test_kill_before_save(leg);
  bool census = step < s->cfg->steps;
  double tc = now_s();
  char *before = census ? rc_census_text(s->m, NULL) : NULL;
  double census_s = now_s() - tc;
  if (census && !before)
    return rc_fail(err, RC_EXIT_SOFTWARE, "census of step %d: out of memory", step);
  /* nothing is saved from a loaded state before its checks have passed: the
   * handed-over checkpoint confirmed, the dataset hashes of the load */
  int rc = confirm_join(&s->confirm, &s->confirm_wait_s, err);
  if (!rc) rc = load_checked(s, err);
  if (rc) {
    free(before);
    return rc;
  }
  double tsave = now_s();
  unsigned how =
      (in_list(leg->save_hashes_at, leg->n_save_hashes_at, step) ? RC_SAVE_HASHES_ONLY : 0) |
      (s->proc->handoff ? RC_SAVE_HANDOFF : 0);
  double waited = s->deferred_wait_s;
  s->m->census_of_save = census; /* the save describes what it wrote for the census */
  rc = in_list(leg->save_deferred_at, leg->n_save_deferred_at, step)
           ? rc_model_save_deferred(s->m, s->ckpt_root, s->args, how, decide_full, s, err)
           : rc_model_save(s->m, s->ckpt_root, s->args, how, err);
  waited = s->deferred_wait_s - waited;
  if (!rc && s->deferred_err.code) {
    *err = s->deferred_err; /* the wait for `run`'s word ended without one */
    rc = err->code;
  }
  if (rc) {
    free(before);
    rc_err_prefix(err, "saving step %d", step);
    return rc;
  }
  /* a hashes-only save is a `save` row too (docs/trace.md): no write in it;
   * a deferred one's wait for `run` is a row of its own */
  fprintf(s->timing, "save,%d,%.6f\n", step, now_s() - tsave - waited);
  if (waited > 0) fprintf(s->timing, "deferred_wait,%d,%.6f\n", step, waited);
  if (!census) return RC_OK;
  tc = now_s();
  rc = rc_census_write(s->m, leg->out, before, err);
  free(before);
  if (rc) {
    rc_err_prefix(err, "census of step %d", step);
    return rc;
  }
  fprintf(s->timing, "census,%d,%.6f\n", step, census_s + now_s() - tc);
  return RC_OK;
}

/* --progress: one line per step, rewritten in place (live) or not. */
static void leg_progress(const leg_state *s, int progress, const rc_step_stats *st, int step,
                         int first, double t0) {
  if (progress == RC_LEG_PROGRESS_OFF || s->rank != 0) return;
  bool live = progress == RC_LEG_PROGRESS_LIVE;
  double elapsed = now_s() - t0, eta = elapsed / (step - first + 1) * (s->last - step);
  fprintf(stderr, "%s[%s] step %d/%d loss %.4f grad_norm %.4f  %.1fs elapsed, ETA %.1fs%s",
          live ? "\r" : "", s->leg->leg, step, s->last, st->loss, st->grad_norm, elapsed, eta,
          live ? "   " : "\n");
  if (live && step == s->last) fputc('\n', stderr);
}

/* RC_PROFILE's summaries on stderr, rank 0: the phases of a step (mean
 * over the steps after the first) and, with =ops, every op. */
static void leg_profile_report(const leg_state *s, int first, int last_done) {
  const rc_model *m = s->m;
  if (s->rank != 0) return;
  if (m->profile && s->last > first) {
    double total = 0;
    for (int p = 0; p < RC_PROFILE_PHASES; p++) total += m->profile_s[p];
    fprintf(stderr, "profile (RC_PROFILE=%s, synchronised; mean per step over steps %d..%d):\n",
            s->profile_ops ? s->profile_env : "1", first + 1, s->last);
    for (int p = 0; p < RC_PROFILE_PHASES; p++)
      fprintf(stderr, "  %-36s %8.2f ms  %5.1f%%\n", rc_model_profile_phase_name(p),
              1e3 * m->profile_s[p] / (s->last - first),
              total > 0 ? 100 * m->profile_s[p] / total : 0);
  }
  if (s->profile_ops && last_done >= first) {
    /* the accumulators were reset after the leg's first step (the warm-up:
     * allocation, first-touch, cuBLAS heuristics) unless it had only one */
    int from = last_done > first ? first + 1 : first;
    fprintf(stderr, "ops profile: %d step(s) profiled, steps %d..%d (%s); per step = total / %d\n",
            last_done - from + 1, from, last_done,
            from > first ? "the leg's first step not counted" : "one step: warm-up included",
            last_done - from + 1);
    rc_ops_profile_report(stderr);
  }
}

/* The steps, a trace row and a timing row each, the saves where asked;
 * then the profile and the trace made durable. */
static int leg_train(leg_state *s, rc_err *err) {
  const rc_leg_opts *leg = s->leg;
  rc_model *m = s->m;
  /* --progress: auto = live on a terminal, else none */
  int progress = leg->progress == RC_LEG_PROGRESS_AUTO
                     ? (isatty(2) ? RC_LEG_PROGRESS_LIVE : RC_LEG_PROGRESS_OFF)
                     : leg->progress;
  double t0 = now_s();
  int first = (int)m->iteration + 1, rc = RC_OK;
  m->profile = s->profile_env && (*s->profile_env == '1' || s->profile_ops);
  int last_done = first - 1; /* the last step that ran, for the ops profile */
  for (int step = first; step <= s->last && !rc; step++) {
    if (m->profile && step == first + 1)
      memset(m->profile_s, 0, sizeof m->profile_s);                  /* skip warm-up */
    if (s->profile_ops && step == first + 1) rc_ops_profile_reset(); /* likewise */
    /* legs sharing one GPU take turns (base/steplock.h): high holds its
     * shared lock over a run of steps, low waits here for a gap; the step's
     * own row does not count the wait */
    if (atomic_load(&s->confirm.state) == 2) { /* the handed-over load did not hold */
      rc = confirm_join(&s->confirm, &s->confirm_wait_s, err);
      break;
    }
    if (rc_model_load_check_failed(m)) { /* nor did the load's dataset hashes */
      rc = load_checked(s, err);
      break;
    }
    rc_step_lock_enter(s->step_lock);
    double ts = now_s();
    rc_step_stats st;
    rc_model_train_step(m, &s->data, &st);
    if (m->dist_rc) {
      rc = m->dist_rc, *err = m->dist_err;
      rc_err_prefix(err, "step %d", step);
      break;
    }
    last_done = step;
    trace_row(s->trace, &st, m->D, m->cfg.mtp_detach_heads);
    fflush(s->trace);
    s->ops->sync();
    fprintf(s->timing, "step,%d,%.6f\n", step, now_s() - ts);
    if (step == first && s->proc->t_spawn >= 0) /* the figure start-up is judged by */
      fprintf(s->timing, "start_to_first_step,%d,%.6f\n", step, now_s() - s->proc->t_spawn);
    leg_progress(s, progress, &st, step, first, t0);
    if (in_list(leg->save_at, leg->n_save_at, step)) rc = leg_save(s, step, err);
    fflush(s->timing);
  }
  rc_step_lock_leave(s->step_lock);
  if (!rc) rc = confirm_join(&s->confirm, &s->confirm_wait_s, err);
  if (!rc) rc = load_checked(s, err);
  if (s->handed) fprintf(s->timing, "handoff_confirm_wait,,%.6f\n", s->confirm_wait_s);
  if (s->leg->resume_from[0]) fprintf(s->timing, "load_check_wait,,%.6f\n", s->load_check_wait_s);
  if (s->proc->step_lock) fprintf(s->timing, "step_lock_wait,,%.6f\n", s->step_lock->waited_s);
  leg_profile_report(s, first, last_done);
  if (!rc && s->rank == 0 && (fflush(s->trace) || fsync(fileno(s->trace))))
    rc = rc_fail(err, RC_EXIT_IOERR, "writing %s/" RC_TRACE_NAME " failed", leg->out);
  return rc;
}

static int leg_run(const rc_config *cfg, const rc_leg_opts *leg, const rc_leg_proc *proc,
                   rc_step_lock *step_lock, int argc, char **argv, rc_err *err) {
  if (proc->wait_for_checkpoint && !leg->resume_from[0])
    return rc_fail(err, RC_EXIT_USAGE, "--wait-for-checkpoint needs --resume-from DIR");
  leg_state s = {.cfg = cfg, .leg = leg, .proc = proc, .step_lock = step_lock, .lock_fd = -1};
  for (int p = 0; p < PH_N; p++) s.phase_s[p] = -1;
  if (proc->t_spawn >= 0) s.phase_s[PH_EXEC] = proc->t_main - proc->t_spawn;
  int rc = rc_dist_env_read(&s.env, err);
  if (rc) return rc;
  const char *kind = pick_collectives(cfg, leg, !strcmp(leg->device, "cpu"));
  if (s.env.external && s.env.world != cfg->world_size)
    return rc_fail(err, RC_EXIT_USAGE, "the launcher (%s) started %d ranks but --world-size is %d",
                   s.env.launcher, s.env.world, cfg->world_size);
  s.last = leg->stop_at ? leg->stop_at : cfg->steps;
  if (!(rc = leg_claim_out(&s, err)) && proc->start_gate)
    rc = rc_start_gate_wait(proc->start_gate, &s.phase_s[PH_GATE], err);
  if (!rc) {
    if (cfg->world_size > 1 && !s.env.external)
      rc = leg_launch_ranks(&s, kind, argc, argv, err);
    else if (!(rc = leg_open_backend(&s, kind, err)) && !(rc = leg_build_model(&s, err)) &&
             !(rc = leg_open_outputs(&s, argc, argv, err)))
      rc = leg_train(&s, err);
  }
  leg_close(&s);
  return rc;
}

/* A leg refused before it wrote anything (a config that does not fit, no
 * GPU, a lock held elsewhere...) leaves no trace: an --out it created for
 * its lock is removed again when the lock file is all it holds. */
static bool only_lock_file(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool only = true;
  for (struct dirent *e; only && (e = readdir(d));)
    only =
        !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, RC_DIR_LOCK_NAME);
  closedir(d);
  return only;
}

int rc_leg_run(const rc_config *cfg, const rc_leg_opts *leg, const rc_leg_proc *proc, int argc,
               char **argv, rc_err *err) {
  if (!leg->out[0]) return rc_fail(err, RC_EXIT_USAGE, "--out DIR is required");
  /* a lock file that cannot serve is refused before anything is written */
  rc_step_lock step_lock;
  rc_step_lock_none(&step_lock);
  if (proc->step_lock) {
    int lrc = rc_step_lock_open(&step_lock, proc->step_lock, proc->step_priority, err);
    if (lrc) return lrc;
    if (proc->step_priority == RC_STEP_PRIORITY_LOW)
      fprintf(
          stderr,
          "resumecheck train: --step-lock %s, priority low: this leg yields the GPU to the "
          "run's critical legs; it starts a step only while none of them steps, so it may "
          "pause between steps (timing.csv: step_lock_wait), and runs at a lower CPU priority\n",
          proc->step_lock);
    else
      fprintf(stderr,
              "resumecheck train: --step-lock %s, priority high: this leg is on the run's "
              "critical path; low-priority legs pause while it steps\n",
              proc->step_lock);
  }
  /* The CPU too: three legs initialising at once on one host draw their
   * weights on every core, and the critical leg's set-up then takes twice
   * as long (2.4 vs 1.5 s to the first step, gpu-small on the H200 host).
   * A low leg, and a pre-warmed leg until its wait is over, run at a lower
   * CPU priority (threads inherit it); bits do not depend on it. */
  if (proc->step_lock && (proc->step_priority == RC_STEP_PRIORITY_LOW || proc->wait_for_checkpoint))
    (void)setpriority(PRIO_PROCESS, 0, RC_BACKGROUND_NICE);
  /* tests/dist_early_checks.sh: the finalize delay for one leg only */
  const char *only = getenv("RC_TEST_FINALIZE_DELAY_LEG");
  if (only && *only && strcmp(only, leg->leg)) unsetenv("RC_TEST_FINALIZE_DELAY_MS");
  struct stat st;
  bool existed = stat(leg->out, &st) == 0;
  int rc = leg_run(cfg, leg, proc, &step_lock, argc, argv, err);
  rc_step_lock_close(&step_lock);
  if (rc && !existed && only_lock_file(leg->out)) {
    char lock[1200];
    rc_path_join(lock, sizeof lock, leg->out, RC_DIR_LOCK_NAME);
    (void)unlink(lock);
    (void)rmdir(leg->out);
  }
  return rc;
}

int rc_leg_memory_report(const rc_config *cfg, const rc_leg_opts *leg, FILE *out, rc_err *err) {
  rc_memory_need need;
  rc_model_memory_need(cfg, &need);
  uint64_t host_avail = rc_host_memory_available();
  const char *device = "cpu", *source = "host";
  uint64_t device_free = host_avail;
  bool want_cuda =
      !strcmp(leg->device, "cuda") || (!strcmp(leg->device, "auto") && rc_cuda_gpu_visible());
  if (!strcmp(leg->device, "cuda")) {
    /* the module must open (its libraries found: a missing one is 125
     * here, not in every leg); then NVML, which needs no CUDA context */
    const char *why = NULL;
    if (!rc_cuda_module_open(&why))
      return rc_fail(err, RC_EXIT_UNTESTABLE, "--device cuda: %s", why);
    uint64_t nv_free = 0;
    char nvml_why[256]; /* why NVML could not say: then CUDA is asked below */
    if (rc_nvml_device_free(&nv_free, nvml_why, sizeof nvml_why) == 0) {
      device = "cuda", source = "nvml";
      device_free = nv_free;
      want_cuda = false;
    }
  }
  if (want_cuda) { /* auto (whether the GPU is usable decides the device), or NVML could not say */
    const char *why = NULL;
    const rc_cuda_module *cm = rc_cuda_ops(&why) ? rc_cuda_module_loaded() : NULL;
    size_t free_b = 0, total_b = 0;
    if (cm && cm->memory_info(&free_b, &total_b) == 0) {
      device = "cuda", source = "cuda";
      device_free = free_b;
    } else if (!strcmp(leg->device, "cuda")) {
      return rc_fail(err, RC_EXIT_UNTESTABLE, "--device cuda: %s",
                     why ? why : "cannot read the device's free memory");
    }
  }
  const char *test_avail = getenv("RC_TEST_MEM_AVAILABLE"); /* the memory check's test hook */
  if (test_avail && *test_avail) device_free = host_avail = strtoull(test_avail, NULL, 10);
  fprintf(out,
          "{\"device\": \"%s\", \"need_device_bytes\": %" PRIu64 ", \"need_host_bytes\": %" PRIu64
          ", \"device_free_bytes\": %" PRIu64 ", \"device_free_source\": \"%s\""
          ", \"host_available_bytes\": %" PRIu64 "}\n",
          device, need.device, need.host, device_free, source, host_avail);
  return RC_OK;
}
