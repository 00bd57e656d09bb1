/* leg.c — one training leg: build the model, optionally resume, train, write
 * the trace and the checkpoints.
 *
 * The trace holds only what must match between legs (docs/trace.md): wall
 * times go to timing.csv and run-specific facts to args.json, so equal runs
 * write byte-identical traces and shards. */
#include "core/leg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backend/ops_profile.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "core/checkpointing.h"
#include "core/data.h"
#include "core/model.h"
#include "dist/comm.h"
#include "dist/launch.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void trace_header(FILE *f, int D) {
  fprintf(f, "step,loss,loss_hex");
  for (int k = 1; k <= D; k++) fprintf(f, ",mtp_loss_%d,mtp_loss_%d_hex", k, k);
  for (int k = 1; k <= D; k++) fprintf(f, ",mtp_acc_%d,mtp_acc_%d_hex", k, k);
  fprintf(f, ",grad_norm,grad_norm_hex,lr,lr_hex,loss_scale,loss_scale_hex,skipped,tokens,"
             "consumed_samples,fp_params,fp_main_grad,fp_optim\n");
}

static void trace_row(FILE *f, const rc_step_stats *s, int D) {
  fprintf(f, "%lld,%.9g,%a", (long long)s->step, s->loss, s->loss);
  for (int k = 0; k < D; k++) fprintf(f, ",%.9g,%a", s->mtp_loss[k], s->mtp_loss[k]);
  for (int k = 0; k < D; k++) fprintf(f, ",%.9g,%a", s->mtp_acc[k], s->mtp_acc[k]);
  fprintf(f, ",%.9g,%a,%.9g,%a,%.9g,%a,%d,%lld,%lld,%016llx,%016llx,%016llx\n", s->grad_norm,
          s->grad_norm, s->lr, s->lr, s->loss_scale, s->loss_scale, s->skipped,
          (long long)s->tokens, (long long)s->consumed_samples, (unsigned long long)s->fp_params,
          (unsigned long long)s->fp_main_grad, (unsigned long long)s->fp_optim);
}

static char *args_json(const rc_leg_opts *leg, const rc_ops *ops, const rc_comm *comm,
                       const rc_dist_env *env, int argc, char **argv) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "leg");
  rc_jw_str(&w, leg->leg);
  rc_jw_key(&w, "device");
  rc_jw_str(&w, ops->name);
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

int rc_leg_run(const rc_config *cfg, const rc_leg_opts *leg, int argc, char **argv, rc_err *err) {
  if (!leg->out[0]) return rc_fail(err, RC_EXIT_USAGE, "--out DIR is required");
  rc_dist_env env;
  int rc = rc_dist_env_read(&env, err);
  if (rc) return rc;
  bool want_cpu = !strcmp(leg->device, "cpu");
  const char *kind = pick_collectives(cfg, leg, want_cpu);
  if (env.external && env.world != cfg->world_size)
    return rc_fail(err, RC_EXIT_USAGE, "the launcher (%s) started %d ranks but --world-size is %d",
                   env.launcher, env.world, cfg->world_size);
  if (cfg->world_size > 1 && !env.external) {
    /* this process is the local launcher, not a rank */
    if ((rc = rc_mkdir_p(leg->out, err))) return rc;
    char rdv[1200];
    if (leg->rendezvous[0])
      snprintf(rdv, sizeof rdv, "%s", leg->rendezvous);
    else
      snprintf(rdv, sizeof rdv, "%s/.rendezvous.%ld", leg->out, (long)getpid());
    return rc_dist_launch_local(kind, cfg->world_size, argc, argv, rdv, err);
  }
  /* one GPU per rank: the launcher's local rank picks it, before CUDA starts */
  if (env.external && !want_cpu) rc_dist_select_gpu(env.local_rank);
  const rc_ops *ops = NULL;
  const char *why = NULL;
  if (want_cpu)
    ops = rc_cpu_ops();
  else {
    ops = rc_cuda_ops(&why);
    if (!ops && !strcmp(leg->device, "auto")) ops = rc_cpu_ops();
    if (!ops) return rc_fail(err, RC_EXIT_UNTESTABLE, "--device cuda: %s", why ? why : "no GPU");
  }
  /* RC_PROFILE=1: time per phase of the step. RC_PROFILE=ops: that, and every
   * op synchronised and timed by a wrapping table (backend/ops_profile.h),
   * installed before anything holds the ops so that everything goes through it */
  const char *profile_env = getenv("RC_PROFILE");
  bool profile_ops = profile_env && !strcmp(profile_env, "ops");
  if (profile_ops) ops = rc_ops_profiled(ops);
  rc_comm *comm = NULL;
  if ((rc = open_comm(kind, cfg, leg, &env, ops, &comm, err))) return rc;
  int rank = comm ? comm->rank : 0;
  rc_data data;
  rc = rc_data_open(&data, cfg, err);
  if (rc) {
    if (comm) comm->destroy(comm);
    return rc;
  }
  rc_model *m = calloc(1, sizeof *m);
  if (!m) abort();
  rc = rc_model_init(m, cfg, ops, rank, err);
  if (!rc && comm) rc = rc_model_attach_comm(m, comm, err);
  /* a failed load starts no training and writes nothing */
  if (!rc && leg->resume_from[0]) rc = rc_model_load(m, leg->resume_from, err);
  if (rc) goto done;

  int last = leg->stop_at ? leg->stop_at : cfg->steps;
  if (last <= m->iteration) {
    rc = rc_fail(err, RC_EXIT_USAGE,
                 "nothing to do: the checkpoint is at step %lld and the leg ends at %d",
                 (long long)m->iteration, last);
    goto done;
  }
  char path[1200], ckpt_root[1200];
  if ((rc = rc_mkdir_p(leg->out, err))) goto done;
  rc_path_join(ckpt_root, sizeof ckpt_root, leg->out, "ckpt");
  /* the trace holds global quantities: rank 0 writes it */
  rc_path_join(path, sizeof path, leg->out, "trace.csv");
  FILE *trace = fopen(rank == 0 ? path : "/dev/null", "w");
  int open_errno = trace ? 0 : errno;
  rc_path_join(path, sizeof path, leg->out, "timing.csv");
  FILE *timing = trace ? fopen(rank == 0 ? path : "/dev/null", "w") : NULL;
  if (trace && !timing) open_errno = errno;
  if (!trace || !timing) {
    rc = rc_fail(err, RC_EXIT_IOERR, "cannot write %s/%s: %s", leg->out,
                 trace ? "timing.csv" : "trace.csv", strerror(open_errno));
    if (trace) fclose(trace);
    if (timing) fclose(timing);
    goto done;
  }
  trace_header(trace, m->D);
  fprintf(timing, "step,seconds\n");
  if (leg->events[0] && rank == 0) {
    m->events.file = fopen(leg->events, "w");
    if (!m->events.file) {
      rc = rc_fail(err, RC_EXIT_IOERR, "--events %s: cannot open for writing", leg->events);
      fclose(trace), fclose(timing);
      goto done;
    }
    m->events.from_step = leg->events_from_step;
  }
  char *args = args_json(leg, ops, comm, &env, argc, argv);
  /* --progress: auto = live on a terminal, else none */
  int progress = leg->progress == RC_LEG_PROGRESS_AUTO
                     ? (isatty(2) ? RC_LEG_PROGRESS_LIVE : RC_LEG_PROGRESS_OFF)
                     : leg->progress;
  bool tty = progress != RC_LEG_PROGRESS_OFF && rank == 0;
  bool live = progress == RC_LEG_PROGRESS_LIVE;
  double t0 = now_s();
  int first = (int)m->iteration + 1;
  m->profile = profile_env && (*profile_env == '1' || profile_ops);
  int last_done = first - 1; /* the last step that ran, for the ops profile */
  for (int step = first; step <= last; step++) {
    if (m->profile && step == first + 1)
      memset(m->profile_s, 0, sizeof m->profile_s);               /* skip warm-up */
    if (profile_ops && step == first + 1) rc_ops_profile_reset(); /* likewise */
    double ts = now_s();
    rc_step_stats st;
    rc_model_train_step(m, &data, &st);
    if (m->dist_rc) {
      rc = m->dist_rc, *err = m->dist_err;
      rc_err_prefix(err, "step %d", step);
      break;
    }
    last_done = step;
    trace_row(trace, &st, m->D);
    fflush(trace);
    ops->sync();
    double dt = now_s() - ts;
    fprintf(timing, "%d,%.6f\n", step, dt);
    if (tty) {
      double elapsed = now_s() - t0, eta = elapsed / (step - first + 1) * (last - step);
      fprintf(stderr, "%s[%s] step %d/%d loss %.4f grad_norm %.4f  %.1fs elapsed, ETA %.1fs%s",
              live ? "\r" : "", leg->leg, step, last, st.loss, st.grad_norm, elapsed, eta,
              live ? "   " : "\n");
      if (live && step == last) fputc('\n', stderr);
    }
    if (in_list(leg->save_at, leg->n_save_at, step)) {
      if ((rc = rc_model_save(m, ckpt_root, args, err))) {
        rc_err_prefix(err, "saving step %d", step);
        break;
      }
    }
  }
  if (m->profile && rank == 0 && last > first) {
    double total = 0;
    for (int p = 0; p < RC_PROFILE_PHASES; p++) total += m->profile_s[p];
    fprintf(stderr, "profile (RC_PROFILE=%s, synchronised; mean per step over steps %d..%d):\n",
            profile_ops ? "ops" : "1", first + 1, last);
    for (int p = 0; p < RC_PROFILE_PHASES; p++)
      fprintf(stderr, "  %-36s %8.2f ms  %5.1f%%\n", rc_model_profile_phase_name(p),
              1e3 * m->profile_s[p] / (last - first),
              total > 0 ? 100 * m->profile_s[p] / total : 0);
  }
  if (profile_ops && rank == 0 && last_done >= first) {
    /* the accumulators were reset after the leg's first step (the warm-up:
     * allocation, first-touch, cuBLAS heuristics) unless it had only one */
    int from = last_done > first ? first + 1 : first;
    fprintf(stderr, "ops profile: %d step(s) profiled, steps %d..%d (%s); per step = total / %d\n",
            last_done - from + 1, from, last_done,
            from > first ? "the leg's first step not counted" : "one step: warm-up included",
            last_done - from + 1);
    rc_ops_profile_report(stderr);
  }
  if (!rc && rank == 0 && (fflush(trace) || fsync(fileno(trace))))
    rc = rc_fail(err, RC_EXIT_IOERR, "writing %s/trace.csv failed", leg->out);
  fclose(trace);
  fclose(timing);
  if (m->events.file) fclose(m->events.file);
  free(args);
done:
  rc_model_free(m);
  free(m);
  rc_data_close(&data);
  if (comm) comm->destroy(comm);
  return rc;
}
