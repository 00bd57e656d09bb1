/* run_checks.c — the checks and the verdict.
 *
 * State checks compare two checkpoint directories with rc_compare_paths
 * (byte-exact, every shard verified against its manifest first, HDF5 in
 * depth, args.json reported as differing by construction); trace checks
 * find the first step and the columns where two traces part. A state check
 * runs whenever both checkpoints are complete, even if a leg failed later,
 * so a crash does not hide what was already known. The verdict follows
 * docs/design.md §10: A/A failures make the resume result inconclusive (exit 2),
 * unless --aa shows two through legs agree while the save leg differs: then
 * the save leg is not a prefix of the through leg (exit 3, a set-up fault
 * rather than non-determinism); resume or arm differences exit 1, a failed
 * leg 70; with --git-bisect divergence is 1 and anything untestable 125. The words follow the seed:
 * "A/A identical (through@5 vs save@5: 1/1 shards byte-identical)", "RESUME
 * diverged at step 6: grad_norm, fp_main_grad differ; loss equal". */
#include "run.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/text.h"
#include "harness/census.h"
#include "harness/report.h"
#include "io/layout.h"

/* "through@5", or "resume@5→10" for a leg that resumed. */
static void leg_at(const rc_leg *leg, int64_t step, char *buf, size_t cap) {
  if (leg->resume_step > 0)
    rc_bufprintf(buf, cap, "%s→%" PRId64, leg->label, step);
  else
    rc_bufprintf(buf, cap, "%s@%" PRId64, leg->label, step);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* Adds the *.h5 names of dir to a list of distinct names. */
static void collect_shards(const char *dir, char ***names, int *n) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!ends_with(e->d_name, ".h5")) continue;
    bool seen = false;
    for (int i = 0; i < *n && !seen; i++) seen = !strcmp((*names)[i], e->d_name);
    if (seen) continue;
    char **p = realloc(*names, (size_t)(*n + 1) * sizeof *p);
    if (!p) break;
    *names = p;
    if (!(p[*n] = strdup(e->d_name))) break;
    (*n)++;
  }
  closedir(d);
}

/* One line about a difference: where, what kind, and compare's own detail
 * (for values: how many elements, where first, by how much, NaN and
 * signed-zero cases counted as such; for bytes: how many, in which ranges).
 * The detail is rc_cmp_add_values' rendering, the one `compare` prints: a
 * second formatter here once said "max |a-b| 0" for NaN against a number. */

/* Does file have a failing (or, with failing false, an informational) diff? */
static bool file_has(const rc_compare_result *r, const char *file, bool failing) {
  for (int i = 0; i < r->n_diffs; i++)
    if (!strcmp(r->diffs[i].file, file) && (r->diffs[i].kind != RC_DIFF_INFORMATIONAL) == failing)
      return true;
  return false;
}

/* Distinct files with a failing difference (and how many are shards), and
 * files whose only differences are informational (args.json: by
 * construction), which the file tally leaves out. */
static void tally_files(const rc_compare_result *r, int *failing, int *failing_shards,
                        int *info_only) {
  for (int i = 0; i < r->n_diffs; i++) {
    const char *file = r->diffs[i].file;
    bool earlier = false;
    for (int k = 0; k < i && !earlier; k++) earlier = !strcmp(r->diffs[k].file, file);
    if (earlier) continue;
    if (file_has(r, file, true)) {
      (*failing)++;
      *failing_shards += ends_with(file, ".h5");
    } else {
      (*info_only)++;
    }
  }
}

/* The check's tallies: shards by name, other files from the compare result;
 * whether args.json differs (by construction, between legs). */
static void check_tallies(rc_check *c) {
  char **shards = NULL;
  int n_shards = 0;
  collect_shards(c->path_a, &shards, &n_shards);
  collect_shards(c->path_b, &shards, &n_shards);
  int files_differ = 0, shards_differ = 0, info_only = 0;
  tally_files(&c->cmp, &files_differ, &shards_differ, &info_only);
  for (int i = 0; i < c->cmp.n_diffs; i++)
    if (c->cmp.diffs[i].kind == RC_DIFF_INFORMATIONAL &&
        ends_with(c->cmp.diffs[i].file, RC_ARGS_NAME))
      c->args_differ = true;
  for (int i = 0; i < n_shards; i++) free(shards[i]);
  free(shards);
  c->shards = n_shards;
  c->shards_identical = n_shards - shards_differ;
  c->files = c->cmp.n_files_compared - info_only;
  if (c->files < files_differ) c->files = files_differ;
  c->files_identical = c->files - files_differ;
}

/* The greatest relative difference, model weights before optimizer state,
 * which is usually where the mechanism shows; -1 if no values differ. */
static int largest_index(const rc_check *c) {
  int largest = -1;
  for (int i = 0; i < c->cmp.n_diffs; i++) {
    const rc_diff *d = &c->cmp.diffs[i];
    if (d->kind != RC_DIFF_VALUES) continue;
    if (largest < 0) {
      largest = i;
      continue;
    }
    const rc_diff *l = &c->cmp.diffs[largest];
    bool dm = !strncmp(d->object, "/model/", 7), lm = !strncmp(l->object, "/model/", 7);
    if ((dm && !lm) || (dm == lm && d->max_rel > l->max_rel)) largest = i;
  }
  return largest;
}

/* The headline is diff i (first_why says why); the largest difference is
 * named beside it when it is another one. */
static void set_headline(rc_check *c, int i, const char *why) {
  rc_diff_describe(&c->cmp.diffs[i], c->first_dataset, sizeof c->first_dataset);
  c->first_is_dataset = c->cmp.diffs[i].object[0] != 0;
  c->first_index = i;
  rc_bufprintf(c->first_why, sizeof c->first_why, "%s", why);
  int largest = largest_index(c);
  c->largest_dataset[0] = 0;
  if (largest >= 0 && largest != i)
    rc_diff_describe(&c->cmp.diffs[largest], c->largest_dataset, sizeof c->largest_dataset);
}

/* First in path order: the first dataset (whole files such as COMPLETE,
 * which hashes the manifest, only when no dataset differs); it is the
 * headline until rc_run_rank_differences ranks the differences. */
static void describe_differences(rc_check *c) {
  int first = -1, first_file = -1;
  for (int i = 0; i < c->cmp.n_diffs; i++) {
    const rc_diff *d = &c->cmp.diffs[i];
    if (d->kind == RC_DIFF_INFORMATIONAL) continue;
    if (first_file < 0) first_file = i;
    if (first < 0 && d->object[0]) first = i;
  }
  if (first < 0) first = first_file;
  if (first < 0) return;
  rc_diff_describe(&c->cmp.diffs[first], c->first_in_path, sizeof c->first_in_path);
  set_headline(c, first, "path order");
}

/* ---- ranking the differences: what diverged first ---- */

/* The words of a name split at '.', '/' and '@' (a dataset's attribute
 * stops it), at most max. */
static int words(const char *s, const char *w[], size_t n[], int max) {
  int k = 0;
  while (*s && *s != '@' && k < max) {
    while (*s == '.' || *s == '/') s++;
    if (!*s || *s == '@') break;
    size_t len = strcspn(s, "./@");
    w[k] = s, n[k] = len, k++;
    s += len;
  }
  return k;
}

/* Does the dataset `object` hold the census field `field` ("rank R: "
 * stripped)? Their words agree, the shorter a prefix of the longer of at
 * least two words (optimizer.step holds /optimizer/step/fc1/weight;
 * optimizer.exp_avg.fc1.weight is /optimizer/exp_avg/fc1/weight). */
static bool holds(const char *object, const char *field) {
  if (!strncmp(field, "rank ", 5)) {
    const char *colon = strstr(field, ": ");
    if (colon) field = colon + 2;
  }
  const char *wa[32], *wb[32];
  size_t na[32], nb[32];
  int ka = words(object, wa, na, 32), kb = words(field, wb, nb, 32);
  int k = ka < kb ? ka : kb;
  if (!k || (ka != kb && k < 2)) return false;
  for (int i = 0; i < k; i++)
    if (na[i] != nb[i] || strncmp(wa[i], wb[i], na[i])) return false;
  return true;
}

/* The kinds of state, in the order a training step reads them: what the
 * step starts from (data position, RNG, counters), the optimizer state
 * the update uses, the weights it produces, and whatever is derived after
 * (EMA, extra state, whole files). */
static const char *const KINDS[] = {"data position, RNG and counters", "optimizer state",
                                    "model weights", "everything else"};

/* object's first path word is name: resumecheck's shards spell
 * "/optimizer/...", PyTorch checkpoints compared by content the state
 * dict's keys ("optim/state/...", TorchTitan's and DCP's). */
static bool top_is(const char *object, const char *name) {
  size_t n = strlen(name);
  if (object[0] == '/') object++;
  /* '.' too: Megatron-LM's torch_dist keys are flat module paths
   * (decoder.layers.0..., optimizer.state.exp_avg...) */
  return !strncmp(object, name, n) &&
         (object[n] == 0 || object[n] == '/' || object[n] == '@' || object[n] == '.');
}

static bool in_list(const char *object, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (top_is(object, names[i])) return true;
  return false;
}

static bool base_is(const char *file, const char *prefix, const char *suffix) {
  const char *b = strrchr(file, '/');
  b = b ? b + 1 : file;
  size_t nb = strlen(b), np = strlen(prefix), ns = strlen(suffix);
  return nb >= np + ns && !strncmp(b, prefix, np) && !strcmp(b + nb - ns, suffix);
}

/* The kind of a differing dataset, by its name and, for a PyTorch layout
 * that keeps each kind in a file of its own (the Hugging Face Trainer's
 * optimizer.pt, scheduler.pt, rng_state*.pth, model.safetensors), by its
 * file. */
static int state_kind(const char *file, const char *object) {
  static const char *const counters[] = {"data",
                                         "rng",
                                         "scheduler",
                                         "loss_scaler",
                                         "grad_scaler",
                                         "iteration",
                                         "meta",
                                         "sched",
                                         "lr_scheduler",
                                         "dataloader",
                                         "data_loader",
                                         "train_state",
                                         "step",
                                         "epoch",
                                         "global_step",
                                         "consumed_samples",
                                         "rng_state",
                                         "opt_param_scheduler",
                                         "num_floating_point_operations_so_far"};
  static const char *const optimizer[] = {"optimizer", "optim", "optimizer_states"};
  static const char *const model[] = {"model",   "module",    "state_dict",
                                      "decoder", "embedding", "output_layer"};
  if (in_list(object, counters, sizeof counters / sizeof *counters)) return 0;
  for (size_t i = 0; i < sizeof optimizer / sizeof *optimizer; i++) {
    size_t n = strlen(optimizer[i]);
    const char *o = object[0] == '/' ? object + 1 : object;
    if (!strncmp(o, optimizer[i], n) && !strncmp(o + n, "/step", 5) &&
        strchr("/@", o[n + 5] ? o[n + 5] : '/'))
      return 0; /* the optimizer's step counts */
  }
  if (in_list(object, optimizer, sizeof optimizer / sizeof *optimizer)) return 1;
  if (in_list(object, model, sizeof model / sizeof *model)) return 2;
  if (base_is(file, "scheduler", ".pt") || base_is(file, "rng_state", ".pth") ||
      base_is(file, "trainer_state", ".json"))
    return 0;
  if (base_is(file, "optimizer", ".pt") || base_is(file, "optimizer", ".bin")) return 1;
  if (base_is(file, "model", ".safetensors") || base_is(file, "pytorch_model", ".bin") ||
      base_is(file, "model", ".pt"))
    return 2;
  return 3;
}

/* The census check of the leg a state check's b side is (its resumed
 * leg), when it compared anything. */
static const rc_check *census_of(const rc_run *run, const rc_check *c) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *k = &run->checks[i];
    if (k->what == RC_CHECK_CENSUS && k->have_census && k->leg_b == c->leg_b &&
        !strcmp(k->arm, c->arm))
      return k;
  }
  return NULL;
}

/* The place of the first saved census field the dataset holds (after-load
 * ones first), INT_MAX if none; *field is set to it. */
static int census_rank(const rc_census_diff *cd, const char *object,
                       const rc_census_field_diff **field) {
  int r = 0;
  for (int pass = 0; cd && pass < 2; pass++)
    for (int i = 0; i < cd->n_diffs; i++) {
      const rc_census_field_diff *f = &cd->diffs[i];
      if (!f->saved || f->first_step != (pass == 1)) continue;
      if (holds(object, f->field)) {
        *field = f;
        return r;
      }
      r++;
    }
  return INT_MAX;
}

typedef struct {
  int file;   /* 0 a dataset, 1 a whole file */
  int census; /* census_rank */
  int kind;   /* state_kind */
  int index;  /* path order */
  const rc_census_field_diff *field;
} rank_key;

static int by_rank(const void *pa, const void *pb) {
  const rank_key *a = pa, *b = pb;
  if (a->file != b->file) return a->file - b->file;
  if (a->census != b->census) return a->census < b->census ? -1 : 1;
  if (a->kind != b->kind) return a->kind - b->kind;
  return a->index - b->index;
}

static bool path_order_only(void) {
  const char *v = getenv("RC_TEST_FIRST_IN_PATH_ORDER");
  return v && !strcmp(v, "1");
}

/* The failing differences of c in rank order (malloc'd, *n of them; NULL
 * when none or out of memory). */
static rank_key *ranked(const rc_run *run, const rc_check *c, int *n) {
  *n = 0;
  if (!c->have_cmp || !c->cmp.n_diffs) return NULL;
  rank_key *k = calloc((size_t)c->cmp.n_diffs, sizeof *k);
  if (!k) return NULL;
  bool plain = path_order_only();
  const rc_check *cc = plain ? NULL : census_of(run, c);
  for (int i = 0; i < c->cmp.n_diffs; i++) {
    const rc_diff *d = &c->cmp.diffs[i];
    if (d->kind == RC_DIFF_INFORMATIONAL) continue;
    rank_key *x = &k[(*n)++];
    *x = (rank_key){d->object[0] ? 0 : 1, INT_MAX, 0, i, NULL};
    if (plain || !d->object[0]) continue;
    x->census = census_rank(cc ? &cc->census : NULL, d->object, &x->field);
    x->kind = state_kind(d->file, d->object);
  }
  qsort(k, (size_t)*n, sizeof *k, by_rank);
  return k;
}

/* The headline of one differing state check. */
static void rank_check(const rc_run *run, rc_check *c) {
  int n = 0;
  rank_key *k = ranked(run, c, &n);
  if (!k) return;
  char why[256] = "path order";
  if (k[0].field) {
    char field[160];
    rc_text_escape(k[0].field->field, field, sizeof field);
    rc_bufprintf(why, sizeof why, "the census: saved field %s differs %s", field,
                 k[0].field->first_step ? "before the first step" : "after the load");
  } else if (!k[0].file && !path_order_only()) {
    bool kinds = false;
    for (int i = 1; i < n && !kinds; i++) kinds = !k[i].file && k[i].kind != k[0].kind;
    if (kinds)
      rc_bufprintf(why, sizeof why, "kind of state: %s, in the order %s; %s; %s; %s",
                   KINDS[k[0].kind], KINDS[0], KINDS[1], KINDS[2], KINDS[3]);
  }
  set_headline(c, k[0].index, why);
  free(k);
}

void rc_run_rank_differences(rc_run *run) {
  for (int i = 0; i < run->n_checks; i++) {
    rc_check *c = &run->checks[i];
    if (c->what == RC_CHECK_STATE && c->status == RC_CHECK_DIFFERS && c->have_cmp)
      rank_check(run, c);
  }
}

void rc_run_differing_names(const rc_run *run, const rc_check *c, int max, char *buf, size_t cap) {
  buf[0] = 0;
  int n = 0;
  rank_key *k = ranked(run, c, &n);
  if (!k) return;
  /* distinct names, in rank order */
  int distinct = 0, datasets = 0, shown = 0;
  size_t len = 0;
  char list[1024] = "";
  for (int i = 0; i < n; i++) {
    const rc_diff *d = &c->cmp.diffs[k[i].index];
    const char *name = d->object[0] ? d->object : d->file;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) {
      const rc_diff *e = &c->cmp.diffs[k[j].index];
      seen = !strcmp(e->object[0] ? e->object : e->file, name);
    }
    if (seen) continue;
    distinct++;
    datasets += d->object[0] != 0;
    if (shown == max) continue;
    char esc[512];
    rc_text_escape(name, esc, sizeof esc);
    int w = snprintf(list + len, sizeof list - len, "%s%s", shown ? ", " : "", esc);
    if (w < 0 || (size_t)w >= sizeof list - len) break;
    len += (size_t)w;
    shown++;
  }
  free(k);
  const char *noun = datasets == distinct ? (distinct == 1 ? "dataset" : "datasets")
                     : datasets == 0      ? (distinct == 1 ? "file" : "files")
                                          : "datasets and files";
  char more[32] = "";
  if (distinct > shown) rc_bufprintf(more, sizeof more, " (first %d)", shown);
  rc_bufprintf(buf, cap, "%d %s: %s%s", distinct, noun, list, more);
}

static void run_state_check(rc_run *run, rc_check *c) {
  const rc_leg *la = &run->legs[c->leg_a], *lb = &run->legs[c->leg_b];
  char a_at[128], b_at[128];
  leg_at(la, c->step, a_at, sizeof a_at);
  leg_at(lb, c->step, b_at, sizeof b_at);
  char ca[RC_RUN_PATH_CAP + 16], cb[RC_RUN_PATH_CAP + 16];
  rc_bufprintf(ca, sizeof ca, "%s/" RC_COMPLETE_NAME, c->path_a);
  rc_bufprintf(cb, sizeof cb, "%s/" RC_COMPLETE_NAME, c->path_b);
  if (!rc_path_exists(ca) || !rc_path_exists(cb)) {
    c->status = RC_CHECK_SKIPPED;
    rc_bufprintf(c->summary, sizeof c->summary,
                 "%s vs %s: not compared, no complete checkpoint in %s", a_at, b_at,
                 rc_path_exists(ca) ? lb->label : la->label);
    return;
  }
  /* Not deep, and never trusting manifests: every shard is read and verified
   * against its manifest before "byte-identical" is said (docs/compare.md);
   * a pair that shares a file (a link) is no comparison at all. */
  rc_compare_opts opts = {c->ignore, c->n_ignore, false, false, run->opts.ckpt_format};
  int rc = rc_run_same_checkpoint(c->path_a, c->path_b, &c->err);
  if (!rc) rc = rc_compare_paths(c->path_a, c->path_b, &opts, &c->cmp, &c->err);
  if (!rc && c->cmp.nothing_compared)
    rc = rc_fail(&c->err, RC_EXIT_NOINPUT, "nothing compared (every file ignored)");
  if (rc) {
    rc_compare_result_free(&c->cmp); /* whatever it gathered before the error */
    c->status = RC_CHECK_ERROR;
    if (!c->err.code) c->err.code = rc;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: comparison failed: %s", a_at, b_at,
                 c->err.msg);
    return;
  }
  c->have_cmp = true;
  /* --noise calibrated: the float values go to the calibrated twin, which
   * judges them against the A/A pairs once every check ran (calibrate.c);
   * this check keeps what must agree whatever the noise */
  if (c->twin >= 0) {
    rc_check *t = &run->checks[c->twin];
    if ((rc = rc_calib_split(&c->cmp, &t->cmp, &c->err))) {
      rc_compare_result_free(&c->cmp);
      c->have_cmp = false;
      c->status = RC_CHECK_ERROR;
      c->err.code = rc;
      rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %s", a_at, b_at, c->err.msg);
      return;
    }
    t->have_cmp = true;
    check_tallies(t);
  }
  /* a side that kept hashes only says so: its shards were never written */
  if (c->cmp.hashes_only_a)
    rc_bufprintf(a_at + strlen(a_at), sizeof a_at - strlen(a_at), " (hashes only)");
  if (c->cmp.hashes_only_b)
    rc_bufprintf(b_at + strlen(b_at), sizeof b_at - strlen(b_at), " (hashes only)");
  check_tallies(c);
  char tally[128];
  rc_check_tally(c, tally, sizeof tally);
  const char *by_construction = c->args_differ ? "; args.json differs by construction" : "";
  if (c->cmp.n_failing == 0) {
    c->status = RC_CHECK_IDENTICAL;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %s%s", a_at, b_at, tally,
                 by_construction);
    return;
  }
  c->status = RC_CHECK_DIFFERS;
  describe_differences(c);
  rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %s; %d difference%s%s", a_at, b_at, tally,
               c->cmp.n_failing, c->cmp.n_failing == 1 ? "" : "s", by_construction);
  /* an A/A pair under --noise calibrated that differs in float values
   * only: that is the noise it measures, not a failure */
  if (c->judged == RC_JUDGED_NOISE && rc_calib_exact_diffs(&c->cmp) == 0) {
    c->status = RC_CHECK_NOISE_MEASURED;
    size_t n = strlen(c->summary);
    rc_bufprintf(c->summary + n, sizeof c->summary - n,
                 "; float values only: the run-to-run noise");
  }
}

static bool has_token(const char *list, const char *tok) {
  size_t n = strlen(tok);
  for (const char *p = list; (p = strstr(p, tok)); p += n) {
    bool start = p == list || p[-1] == ',';
    bool end = p[n] == 0 || p[n] == ',';
    if (start && end) return true;
  }
  return false;
}

/* "grad_norm, fp_main_grad differ; loss equal" */
static void trace_phrase(const rc_trace_diff *t, char *buf, size_t cap) {
  rc_text_differ_phrase(t->columns, buf, cap);
  size_t len = strlen(buf);
  if (has_token(t->equal_columns, "loss")) rc_bufprintf(buf + len, cap - len, "; loss equal");
}

static void run_trace_check(rc_run *run, rc_check *c) {
  const rc_leg *la = &run->legs[c->leg_a], *lb = &run->legs[c->leg_b];
  if (la->state != RC_LEG_OK || lb->state != RC_LEG_OK) {
    c->status = RC_CHECK_SKIPPED;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: not compared, leg %s did not finish",
                 la->label, lb->label, la->state != RC_LEG_OK ? la->label : lb->label);
    return;
  }
  bool ha = rc_path_exists(c->path_a), hb = rc_path_exists(c->path_b);
  if (!ha && !hb) {
    c->status = RC_CHECK_SKIPPED;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: no trace.csv (the trainer writes none)",
                 la->label, lb->label);
    return;
  }
  if (!ha || !hb) {
    c->status = RC_CHECK_DIFFERS;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: trace.csv missing in %s", la->label,
                 lb->label, ha ? lb->label : la->label);
    return;
  }
  int rc = rc_trace_compare(c->path_a, c->path_b, &c->trace, &c->err);
  if (rc) {
    c->status = RC_CHECK_ERROR;
    if (!c->err.code) c->err.code = rc;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: trace comparison failed: %s", la->label,
                 lb->label, c->err.msg);
    return;
  }
  c->have_trace = true;
  int64_t want = c->trace_to - c->trace_from + 1;
  if (!c->trace.comparable) {
    c->status = RC_CHECK_DIFFERS;
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: traces not comparable (headers differ)",
                 la->label, lb->label);
  } else if (c->trace.first_step >= 0) {
    char phrase[768];
    trace_phrase(&c->trace, phrase, sizeof phrase);
    c->status = RC_CHECK_DIFFERS;
    rc_bufprintf(c->summary, sizeof c->summary, "diverged at step %" PRId64 ": %s",
                 c->trace.first_step, phrase);
  } else if (c->trace.steps_compared < want) {
    c->status = RC_CHECK_DIFFERS;
    rc_bufprintf(c->summary, sizeof c->summary,
                 "%s vs %s: only %" PRId64 " of steps %" PRId64 "..%" PRId64 " are in both traces",
                 la->label, lb->label, c->trace.steps_compared, c->trace_from, c->trace_to);
  } else {
    c->status = RC_CHECK_IDENTICAL;
    rc_bufprintf(c->summary, sizeof c->summary,
                 "%s vs %s: steps %" PRId64 "..%" PRId64 " identical", la->label, lb->label,
                 c->trace_from, c->trace_to);
  }
}

static void census_path(const char *dir, int64_t step, int rank, bool first_step, char *buf,
                        size_t cap) {
  char name[96];
  if (first_step)
    rc_census_first_step_filename(name, sizeof name, step, rank);
  else
    rc_census_filename(name, sizeof name, step, rank, false);
  rc_bufprintf(buf, cap, "%s/%s", dir, name);
}

/* How many ranks wrote a census of this kind: as many as either leg has. */
static int census_ranks(const rc_check *c, bool first_step) {
  char pa[RC_RUN_PATH_CAP + 128], pb[RC_RUN_PATH_CAP + 128];
  int ranks = 0;
  for (;; ranks++) {
    census_path(c->path_a, c->step, ranks, first_step, pa, sizeof pa);
    census_path(c->path_b, c->step, ranks, first_step, pb, sizeof pb);
    if (!rc_path_exists(pa) && !rc_path_exists(pb)) return ranks;
  }
}

/* A census comparison that failed: the check is an error. */
static void census_error(rc_check *c, int rc, const char *a_at, const char *b_at) {
  rc_census_diff_free(&c->census);
  c->status = RC_CHECK_ERROR;
  if (!c->err.code) c->err.code = rc;
  rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: census comparison failed: %s", a_at, b_at,
               c->err.msg);
}

/* The first-step censuses (docs/census.md), when both legs wrote them for
 * every rank: their differences join the check's, marked first_step; when
 * only one leg did, census_first_only names it and nothing is compared. */
static int first_step_census(const rc_run *run, rc_check *c) {
  char pa[RC_RUN_PATH_CAP + 128], pb[RC_RUN_PATH_CAP + 128];
  char aa[RC_RUN_PATH_CAP + 128], ab[RC_RUN_PATH_CAP + 128];
  int ranks = census_ranks(c, true);
  for (int r = 0; r < ranks; r++) {
    census_path(c->path_a, c->step, r, true, pa, sizeof pa);
    census_path(c->path_b, c->step, r, true, pb, sizeof pb);
    bool ha = rc_path_exists(pa), hb = rc_path_exists(pb);
    if (ha != hb) {
      rc_bufprintf(c->census_first_only, sizeof c->census_first_only, "%s",
                   run->legs[ha ? c->leg_a : c->leg_b].label);
      return RC_OK;
    }
  }
  for (int r = 0; r < ranks; r++) {
    census_path(c->path_a, c->step, r, true, pa, sizeof pa);
    census_path(c->path_b, c->step, r, true, pb, sizeof pb);
    census_path(c->path_a, c->step, r, false, aa, sizeof aa);
    census_path(c->path_b, c->step, r, false, ab, sizeof ab);
    rc_census_diff d = {0};
    int rc = rc_census_compare_first_step(pa, pb, aa, ab, &d, &c->err);
    if (!rc && !rc_census_merge(&c->census, &d, ranks > 1 ? r : -1))
      rc = rc_fail(&c->err, RC_EXIT_SOFTWARE, "out of memory");
    rc_census_diff_free(&d);
    if (rc) return rc;
  }
  return RC_OK;
}

/* "; 1 process-local field differs by design" */
static void local_phrase(int n, char *buf, size_t cap) {
  buf[0] = 0;
  if (n)
    rc_bufprintf(buf, cap, "; %d process-local field%s differ%s by design", n, n == 1 ? "" : "s",
                 n == 1 ? "s" : "");
}

/* The through leg's census after step K against the resumed leg's after
 * loading K, rank by rank (every rank writes its own), and their
 * first-step censuses when both wrote them. Differences of `saved` fields
 * fail the check; `local` ones are listed, by design. The built-in trainer
 * always writes the after-load pair: a leg of it that finished without one
 * is an error (66), not a skip. */
static void run_census_check(rc_run *run, rc_check *c) {
  const rc_leg *la = &run->legs[c->leg_a], *lb = &run->legs[c->leg_b];
  char a_at[128], b_at[128], pa[RC_RUN_PATH_CAP + 128], pb[RC_RUN_PATH_CAP + 128];
  rc_bufprintf(a_at, sizeof a_at, "%s@%" PRId64, la->label, c->step);
  rc_bufprintf(b_at, sizeof b_at, "%s (after loading %" PRId64 ")", lb->label, c->step);
  census_path(c->path_a, c->step, 0, false, pa, sizeof pa);
  census_path(c->path_b, c->step, 0, false, pb, sizeof pb);
  bool ha = rc_path_exists(pa), hb = rc_path_exists(pb);
  if (!ha || !hb) {
    if (run->opts.trainer == RC_TRAINER_SELF && la->state == RC_LEG_OK && lb->state == RC_LEG_OK) {
      c->status = RC_CHECK_ERROR;
      c->err.code = rc_fail(&c->err, RC_EXIT_NOINPUT,
                            "%s: missing: resumecheck train writes a census after every save "
                            "before the last step and after every load, and leg %s finished",
                            ha ? pb : pa, ha ? lb->label : la->label);
      rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %s", a_at, b_at, c->err.msg);
      return;
    }
    c->status = RC_CHECK_SKIPPED;
    if (!ha && !hb)
      rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: no census (the legs wrote none)", a_at,
                   b_at);
    else
      rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: not compared, no census from %s", a_at,
                   b_at, ha ? lb->label : la->label);
    return;
  }
  int ranks = census_ranks(c, false);
  for (int r = 0; r < ranks; r++) {
    census_path(c->path_a, c->step, r, false, pa, sizeof pa);
    census_path(c->path_b, c->step, r, false, pb, sizeof pb);
    rc_census_diff d;
    int rc = rc_census_compare_files(pa, pb, &d, &c->err);
    if (!rc && !rc_census_merge(&c->census, &d, ranks > 1 ? r : -1))
      rc = rc_fail(&c->err, RC_EXIT_SOFTWARE, "out of memory");
    if (rc) {
      rc_census_diff_free(&d);
      census_error(c, rc, a_at, b_at);
      return;
    }
  }
  int rc = first_step_census(run, c);
  if (rc) {
    census_error(c, rc, a_at, b_at);
    return;
  }
  c->have_census = true;
  c->census_ranks = ranks;
  const rc_census_diff *d = &c->census;
  char ranks_text[32] = "";
  if (ranks > 1) rc_bufprintf(ranks_text, sizeof ranks_text, " over %d ranks", ranks);
  char local[160];
  local_phrase(d->n_local_differ, local, sizeof local);
  c->status = d->n_saved_differ || d->first_saved_differ ? RC_CHECK_DIFFERS : RC_CHECK_IDENTICAL;
  char counts[160];
  rc_census_count_phrase(d, false, counts, sizeof counts);
  if (d->n_saved_differ)
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %d fields%s; %s%s", a_at, b_at,
                 d->n_fields, ranks_text, counts, local);
  else
    rc_bufprintf(c->summary, sizeof c->summary, "%s vs %s: %d fields%s, saved state identical%s",
                 a_at, b_at, d->n_fields, ranks_text, local);
  /* which census saw what: the first-step one's own clause */
  size_t n = strlen(c->summary);
  if (c->census_first_only[0]) {
    rc_bufprintf(c->summary + n, sizeof c->summary - n,
                 "; before the first step: not compared, only %s wrote a census",
                 c->census_first_only);
  } else if (d->first_step) {
    local_phrase(d->first_local_differ, local, sizeof local);
    rc_census_count_phrase(d, true, counts, sizeof counts);
    if (d->first_saved_differ)
      rc_bufprintf(c->summary + n, sizeof c->summary - n,
                   "; before the first step: %d fields; %s%s", d->first_fields, counts, local);
    else
      rc_bufprintf(c->summary + n, sizeof c->summary - n,
                   "; before the first step: %d fields, saved state identical%s", d->first_fields,
                   local);
  }
}

/* ---- state checks while the legs run ---- */

typedef struct {
  rc_run *run;
  rc_check *c;
} early_job;

static void *early_check_run(void *arg) {
  early_job *j = arg;
  run_state_check(j->run, j->c);
  atomic_store(&j->run->early_done, true);
  free(j);
  return NULL;
}

/* A rank's manifest fragment (layout.h) is still in dir: with several
 * ranks, finalize writes COMPLETE and then removes the fragments, so until
 * they are gone the directory still changes. */
static bool has_fragment(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) found = rc_is_fragment_filename(e->d_name);
  closedir(d);
  return found;
}

/* Both checkpoints of a pending state check are complete and final: their
 * COMPLETE markers, and no fragment left to be removed. */
static bool state_check_ready(const rc_check *c) {
  if (c->what != RC_CHECK_STATE || c->status != RC_CHECK_PENDING || c->during_legs || c->is_twin)
    return false;
  char ca[RC_RUN_PATH_CAP + 16], cb[RC_RUN_PATH_CAP + 16];
  rc_bufprintf(ca, sizeof ca, "%s/" RC_COMPLETE_NAME, c->path_a);
  rc_bufprintf(cb, sizeof cb, "%s/" RC_COMPLETE_NAME, c->path_b);
  return rc_path_exists(ca) && rc_path_exists(cb) && !has_fragment(c->path_a) &&
         !has_fragment(c->path_b);
}

void rc_run_early_checks_join(rc_run *run) {
  if (run->early_check < 0) return;
  pthread_join(run->early_tid, NULL);
  run->early_check = -1;
}

void rc_run_early_checks_poll(rc_run *run) {
  /* a test's control: every check after the legs, as before */
  const char *off = getenv("RC_TEST_NO_EARLY_CHECKS");
  if (off && *off == '1') return;
  /* only the built-in trainer's checkpoints are final at their marker (it
   * writes COMPLETE last, by construction); an exec trainer may add files
   * after it (a tracker file, a copy), so its checks wait for its legs */
  if (run->opts.trainer != RC_TRAINER_SELF) return;
  if (run->early_check >= 0) {
    if (!atomic_load(&run->early_done)) return; /* one at a time */
    rc_run_early_checks_join(run);
  }
  for (int i = 0; i < run->n_checks; i++) {
    rc_check *c = &run->checks[i];
    if (!state_check_ready(c)) continue;
    early_job *j = malloc(sizeof *j);
    if (!j) return; /* it runs after the legs instead */
    *j = (early_job){run, c};
    c->during_legs = true;
    atomic_store(&run->early_done, false);
    if (pthread_create(&run->early_tid, NULL, early_check_run, j)) {
      c->during_legs = false;
      free(j);
      return;
    }
    run->early_check = i;
    return;
  }
}

int rc_run_checks(rc_run *run, rc_err *err) {
  rc_run_early_checks_join(run);
  /* from checks_run: a second call (confirming legs) runs only their checks */
  const int from = run->checks_run;
  for (int i = from; i < run->n_checks; i++) {
    rc_check *c = &run->checks[i];
    if (c->during_legs || c->is_twin) continue; /* compared while the legs ran; judged below */
    if (c->what == RC_CHECK_STATE)
      run_state_check(run, c);
    else if (c->what == RC_CHECK_CENSUS)
      run_census_check(run, c);
    else if (c->judged != RC_JUDGED_BYTES)
      rc_calib_trace_check(run, c); /* --noise calibrated: by kind of column */
    else
      run_trace_check(run, c);
  }
  rc_calib_states(run, from); /* needs every A/A pair: after every check */
  run->checks_run = run->n_checks;
  if (rc_calib_reproduce(run)) /* needs every resume leg's judgement */
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory judging the resume legs");
  rc_run_rank_differences(run); /* needs the census checks: after every check */
  rc_run_verdict(run);
  return RC_OK;
}

/* Which arm names the divergence: the only one, or the one with fusion on. */
static bool primary_arm(const rc_run *run, const char *arm) {
  return run->opts.confirm_arm ? !strcmp(arm, "fusion-on") || !*arm : true;
}

/* The first divergence among checks of one class: the earliest trace step,
 * and the first differing dataset of the state check beside it. */
static bool find_first_divergence(rc_run *run, rc_check_class cls) {
  int best = -1;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls != cls || c->status != RC_CHECK_DIFFERS || !primary_arm(run, c->arm)) continue;
    if (c->what == RC_CHECK_TRACE && c->have_trace && c->trace.first_step >= 0 &&
        (best < 0 || run->checks[best].what != RC_CHECK_TRACE ||
         c->trace.first_step < run->checks[best].trace.first_step))
      best = i;
  }
  int state = -1;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls != cls || c->what != RC_CHECK_STATE || c->status != RC_CHECK_DIFFERS ||
        !primary_arm(run, c->arm))
      continue;
    if (state < 0) state = i;
    if (best >= 0 && c->leg_b == run->checks[best].leg_b) {
      state = i;
      break;
    }
  }
  if (best < 0) best = state;
  /* neither a step nor the final state differs, only what a process held
   * at the resume point: a divergence still to come */
  for (int i = 0; best < 0 && i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls == cls && c->what == RC_CHECK_CENSUS && c->status == RC_CHECK_DIFFERS &&
        primary_arm(run, c->arm))
      best = i;
  }
  if (best < 0) return false;
  run->first_div_check = best;
  run->first_div_step =
      run->checks[best].what == RC_CHECK_TRACE ? run->checks[best].trace.first_step : -1;
  if (state >= 0) {
    rc_bufprintf(run->first_div_dataset, sizeof run->first_div_dataset, "%s",
                 run->checks[state].first_dataset);
    rc_bufprintf(run->first_div_in_path, sizeof run->first_div_in_path, "%s",
                 run->checks[state].first_in_path);
    rc_bufprintf(run->first_div_why, sizeof run->first_div_why, "%s", run->checks[state].first_why);
    rc_bufprintf(run->first_div_largest, sizeof run->first_div_largest, "%s",
                 run->checks[state].largest_dataset);
    run->first_div_is_dataset = run->checks[state].first_is_dataset;
  }
  return true;
}

static void set_verdict(rc_run *run, const char *v, int code, int bisect_code) {
  rc_bufprintf(run->verdict, sizeof run->verdict, "%s", v);
  run->exit_code = run->opts.git_bisect ? bisect_code : code;
}

/* Tally of one arm ("" = all): failed legs, failing checks per class. */
typedef struct {
  int legs_failed, aa, resume, arms, errors;
  int first_failed_leg, first_error;
} tally;

static tally count(const rc_run *run, const char *arm) {
  tally t = {0, 0, 0, 0, 0, -1, -1};
  for (int i = 0; i < run->n_legs; i++) {
    if (arm && strcmp(run->legs[i].arm, arm)) continue;
    if (run->legs[i].state == RC_LEG_FAILED) {
      if (t.first_failed_leg < 0) t.first_failed_leg = i;
      t.legs_failed++;
    }
  }
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (arm && strcmp(c->arm, arm)) continue;
    if (c->status == RC_CHECK_ERROR && t.first_error < 0) t.first_error = i;
    t.errors += c->status == RC_CHECK_ERROR;
    if (c->status != RC_CHECK_DIFFERS) continue;
    t.aa += c->cls == RC_CLASS_AA;
    t.resume += c->cls == RC_CLASS_RESUME;
    t.arms += c->cls == RC_CLASS_ARMS;
  }
  return t;
}

/* A/A checks come in two kinds: through vs save (up to K, where the save
 * leg stops) and, with --aa, through vs aa (two legs running to N). */
static bool is_save_check(const rc_run *run, const rc_check *c) {
  return c->cls == RC_CLASS_AA && !strcmp(run->legs[c->leg_b].name, "save");
}

/* Does a through-vs-aa check differ (two fresh processes running the same
 * steps to N)? */
static bool through_legs_differ(const rc_run *run) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls == RC_CLASS_AA && !is_save_check(run, c) && c->status == RC_CHECK_DIFFERS)
      return true;
  }
  return false;
}

/* --aa, and in every arm the two through legs agree (A/A@N identical, their
 * traces identical or absent) while a through-vs-save check differs: the
 * legs repeat themselves over N steps, so what differs is where the save leg
 * stops. Only positive evidence counts: an A/A@N that was not compared
 * leaves the verdict at aa-failed. */
static bool save_leg_not_a_prefix(const rc_run *run) {
  if (!run->opts.aa) return false;
  int aa_identical = 0, save_differs = 0;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls != RC_CLASS_AA) continue;
    if (is_save_check(run, c)) {
      save_differs += c->status == RC_CHECK_DIFFERS;
    } else if (c->what == RC_CHECK_STATE) {
      if (c->status != RC_CHECK_IDENTICAL) return false;
      aa_identical++;
    } else if (c->status != RC_CHECK_IDENTICAL && c->status != RC_CHECK_SKIPPED) {
      return false;
    }
  }
  return aa_identical > 0 && save_differs > 0;
}

/* The not-a-prefix verdict's words: which A/A@N agrees, where the save leg
 * first differs (step and first column, or the first differing dataset),
 * and, when the first column is the learning rate, the usual cause: an LR
 * schedule built for the step the leg stops at instead of --steps. */
static void not_a_prefix_text(rc_run *run) {
  const rc_check *c = run->first_div_check >= 0 ? &run->checks[run->first_div_check] : NULL;
  const char *aa_name = "A/A";
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *a = &run->checks[i];
    if (a->cls == RC_CLASS_AA && a->what == RC_CHECK_STATE && !is_save_check(run, a)) {
      aa_name = a->name;
      break;
    }
  }
  int64_t stop = c ? run->legs[c->leg_b].last_step : -1;
  char first_col[128] = "", where[1024];
  if (c && c->what == RC_CHECK_TRACE && c->have_trace && c->trace.first_step >= 0) {
    size_t n = strcspn(c->trace.columns, ",");
    if (n >= sizeof first_col) n = sizeof first_col - 1;
    memcpy(first_col, c->trace.columns, n);
    first_col[n] = 0;
    char phrase[768];
    trace_phrase(&c->trace, phrase, sizeof phrase);
    rc_bufprintf(where, sizeof where, "first at step %" PRId64 ", column %s (%s)",
                 c->trace.first_step, first_col, phrase);
  } else if (c && c->first_dataset[0]) {
    rc_bufprintf(where, sizeof where, "at step %" PRId64 ", first in %s %s", c->step,
                 c->first_is_dataset ? "dataset" : "file", c->first_dataset);
  } else {
    rc_bufprintf(where, sizeof where, "(%s)", c ? c->summary : "");
  }
  rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
               "the save leg is not a prefix of the through leg: two through legs agree (%s "
               "identical), but the save leg, which stops at step %" PRId64
               ", differs from through %s; the resume result is inconclusive",
               aa_name, stop, where);
  if (!strcmp(first_col, "lr"))
    rc_bufprintf(run->verdict_hint, sizeof run->verdict_hint,
                 "the schedule depends on where the leg stops — keep the horizon at N (the LR "
                 "schedule must be built for --steps %" PRId64 ", not for the step the leg stops "
                 "at)",
                 run->opts.steps);
  else
    rc_bufprintf(run->verdict_hint, sizeof run->verdict_hint,
                 "a leg told to stop at K must train steps 1..K exactly as the through leg does: "
                 "look for what the trainer derives from the step it stops at");
}

static void mechanism(rc_run *run) {
  if (!run->opts.confirm_arm) return;
  tally on = count(run, "fusion-on"), off = count(run, "fusion-off");
  rc_mechanism m;
  const char *text;
  if (on.legs_failed || off.legs_failed || on.errors || off.errors || run->interrupted) {
    m = RC_MECH_INCONCLUSIVE;
    text = "inconclusive: a leg failed in one of the arms";
  } else if ((on.aa || off.aa) && save_leg_not_a_prefix(run)) {
    m = RC_MECH_INCONCLUSIVE;
    text = "inconclusive: the save leg is not a prefix of the through leg";
  } else if (on.aa || off.aa) {
    m = RC_MECH_INCONCLUSIVE;
    text = on.aa ? "inconclusive: A/A failed with fusion on (non-determinism)"
                 : "inconclusive: A/A failed with fusion off (non-determinism)";
  } else if (on.resume && !off.resume) {
    m = RC_MECH_CONFIRMED;
    text = "mechanism confirmed: the resume divergence is present with fusion on and absent "
           "with fusion off (the fused wgrad GEMM overwrites main_grad)";
  } else if (on.resume && off.resume) {
    m = RC_MECH_NOT_CONFIRMED;
    text = "mechanism not confirmed: the resume divergence persists with fusion off, so it is "
           "not the fused-wgrad overwrite";
  } else if (off.resume) {
    m = RC_MECH_NOT_CONFIRMED;
    text = "mechanism not confirmed: the resume divergence appears only with fusion off";
  } else {
    m = RC_MECH_NOTHING;
    text = "nothing to confirm: no resume divergence with fusion on";
  }
  run->mechanism = m;
  rc_bufprintf(run->mechanism_text, sizeof run->mechanism_text, "%s", text);
}

/* The census of the leg the divergence is in (or the first census check
 * that fails), or NULL. */
static int finding_check(const rc_run *run) {
  const rc_check *div = run->first_div_check >= 0 ? &run->checks[run->first_div_check] : NULL;
  int c = -1;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *k = &run->checks[i];
    if (k->what != RC_CHECK_CENSUS || !k->have_census || !primary_arm(run, k->arm)) continue;
    if (div && k->leg_b == div->leg_b) return i;
    if (c < 0 && (k->status == RC_CHECK_DIFFERS || !div)) c = i;
  }
  return c;
}

/* The census of the leg the divergence is in, as one observed line: which
 * saved fields differ (and in which census, when there were two), or that
 * the saved state is identical and which process-local fields differ. */
static void census_finding(rc_run *run) {
  run->census_finding[0] = 0;
  int ci = finding_check(run);
  if (ci < 0) return;
  const rc_check *c = &run->checks[ci];
  const rc_census_diff *d = &c->census;
  int saved = d->n_saved_differ + d->first_saved_differ;
  if (saved) {
    char first[768], where[160] = "", counts[160];
    rc_census_describe(rc_census_first_saved(d), "through", "resumed", first, sizeof first);
    if (d->first_step)
      rc_bufprintf(where, sizeof where, " (%d after the load, %d before the first step)",
                   d->n_saved_differ, d->first_saved_differ);
    /* both censuses' counts by class, as one */
    rc_census_diff sum = {0};
    sum.n_saved_differ = saved;
    sum.n_derived_differ = d->n_derived_differ + d->first_derived_differ;
    sum.n_copy_differ = d->n_copy_differ + d->first_copy_differ;
    rc_census_count_phrase(&sum, false, counts, sizeof counts);
    rc_bufprintf(run->census_finding, sizeof run->census_finding,
                 "state census at step %" PRId64 " (%s): %s%s; first: %s", c->step,
                 run->legs[c->leg_b].label, counts, where, first);
    return;
  }
  char groups[512], fields[96] = "";
  rc_census_local_groups(d, groups, sizeof groups);
  if (d->first_step)
    rc_bufprintf(fields, sizeof fields, "%d fields after the load, %d before the first step",
                 d->n_fields, d->first_fields);
  else
    rc_bufprintf(fields, sizeof fields, "%d fields", d->n_fields);
  bool local = d->n_local_differ || d->first_local_differ;
  rc_bufprintf(run->census_finding, sizeof run->census_finding,
               "state census at step %" PRId64 " (%s): saved state identical (%s)%s%s%s", c->step,
               run->legs[c->leg_b].label, fields,
               local ? "; process-local fields differ by design: " : "", groups,
               local ? "" : "; no process-local field differs");
}

/* RESUME diverged and no census compared (in the primary arm) saw a saved
 * field differ: what the census of the diverging leg covered, from the
 * fields its files hold, and what no census can see. */
static void census_silent(rc_run *run) {
  int compared = 0;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *k = &run->checks[i];
    if (k->what != RC_CHECK_CENSUS || !primary_arm(run, k->arm)) continue;
    if (k->status == RC_CHECK_DIFFERS || k->status == RC_CHECK_ERROR) return;
    compared += k->status == RC_CHECK_IDENTICAL && k->have_census;
  }
  int ci = finding_check(run);
  if (!compared || ci < 0) return;
  const rc_check *c = &run->checks[ci];
  const rc_census_diff *d = &c->census;
  char covers[512], fields[128];
  rc_census_coverage(d, covers, sizeof covers);
  if (d->first_step)
    rc_bufprintf(fields, sizeof fields, "%d fields after the load and %d before the first step",
                 d->n_fields, d->first_fields);
  else
    rc_bufprintf(fields, sizeof fields, "%d field%s", d->n_fields, d->n_fields == 1 ? "" : "s");
  run->census_silent_check = ci;
  rc_bufprintf(run->census_silent, sizeof run->census_silent,
               "the census saw no difference at %" PRId64
               ": it compared %s (what it covers: %s); it does not cover data order, an RNG "
               "consumed after the load and before the census, or a stateful object the trainer "
               "did not register",
               c->step, fields, covers[0] ? covers : "no field");
}

/* An A/A check failed and the save leg is not shown to be a mere
 * non-prefix: two fresh processes differ, or (without --aa) through and
 * save differ, which alone cannot tell the two causes apart. */
static void aa_failed_verdict(rc_run *run) {
  set_verdict(run, "aa-failed", RC_EXIT_AA, RC_EXIT_UNTESTABLE);
  find_first_divergence(run, RC_CLASS_AA);
  const rc_check *c = run->first_div_check >= 0 ? &run->checks[run->first_div_check] : NULL;
  if (run->opts.noise == RC_NOISE_CALIBRATED) {
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "A/A failed (%s): two fresh processes differ where no run-to-run noise may "
                 "(an exact trace column, or state that is not a float value), so the resume "
                 "result is inconclusive",
                 c ? c->summary : "");
    return;
  }
  if (through_legs_differ(run)) {
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "A/A failed (%s): two fresh processes differ, so the run is not deterministic "
                 "and the resume result is inconclusive",
                 c ? c->summary : "");
    return;
  }
  /* Only through vs save differs: a leg that stops at K and one that runs
   * to N are not the same process twice, so this alone cannot tell
   * non-determinism from a save leg that is not a prefix. */
  rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
               "A/A failed (%s): the save leg differs from the through leg: either the run is "
               "not deterministic, or the save leg is not a prefix of the through leg (e.g. a "
               "schedule built for the leg's own stop step); the resume result is inconclusive",
               c ? c->summary : "");
  if (!run->opts.aa)
    rc_bufprintf(run->verdict_hint, sizeof run->verdict_hint,
                 "re-run with --aa to tell them apart: if two through legs agree at step %" PRId64
                 ", the save leg is not a prefix (exit %d); if they differ, the run is not "
                 "deterministic (exit %d)",
                 run->opts.steps, RC_EXIT_NOT_PREFIX, RC_EXIT_AA);
}

/* A resume check failed: the first divergent step and columns, or, when
 * only the census differs, the state at the resume point. */
static void resume_verdict(rc_run *run) {
  set_verdict(run, "resume-diverged", RC_EXIT_DIVERGED, RC_EXIT_DIVERGED);
  find_first_divergence(run, RC_CLASS_RESUME);
  census_finding(run);
  census_silent(run);
  const rc_check *c = run->first_div_check >= 0 ? &run->checks[run->first_div_check] : NULL;
  if (c && c->what == RC_CHECK_TRACE && c->have_trace && c->trace.first_step >= 0) {
    char phrase[768];
    trace_phrase(&c->trace, phrase, sizeof phrase);
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "RESUME diverged at step %" PRId64 ": %s", c->trace.first_step, phrase);
  } else if (c && c->what == RC_CHECK_CENSUS && c->have_census &&
             rc_census_first_saved(&c->census)) {
    char first[768];
    rc_census_describe(rc_census_first_saved(&c->census), "through", "resumed", first,
                       sizeof first);
    if (run->opts.noise == RC_NOISE_CALIBRATED) { /* the steps were not compared byte for byte */
      char also[768] = "", hint[8];
      int k = -1;
      if (rc_calib_verdict(run, also, sizeof also, hint, sizeof hint, &k) == 0 || !also[0])
        rc_bufprintf(also, sizeof also, "every calibrated check identical");
      rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                   "RESUME diverged at the resume point (an exact check, whatever the noise): the "
                   "state the resumed process started step %" PRId64 " from differs: %s; beside "
                   "it, %s",
                   c->step + 1, first, also);
      return;
    }
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "RESUME diverged at the resume point: every step to %" PRId64
                 " and the final state agree, but the state the resumed process started step "
                 "%" PRId64 " from differs: %s",
                 run->legs[c->leg_b].last_step, c->step + 1, first);
  } else {
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text, "RESUME diverged (%s)",
                 c ? c->summary : "");
  }
}

/* --noise calibrated, no exact check failed: the calibrated checks'
 * verdict (calibrate.c), or false when every check is identical. */
static bool calibrated_verdict(rc_run *run) {
  int check = -1;
  int v = rc_calib_verdict(run, run->verdict_text, sizeof run->verdict_text, run->verdict_hint,
                           sizeof run->verdict_hint, &check);
  if (v == RC_CHECK_EXCEEDS_NOISE) {
    set_verdict(run, "exceeds-noise", RC_EXIT_DIVERGED, RC_EXIT_DIVERGED);
    const rc_check *c = &run->checks[check];
    run->first_div_check = check;
    run->first_div_step = c->what == RC_CHECK_TRACE ? c->calib.step : -1;
    if (c->what == RC_CHECK_STATE) {
      rc_bufprintf(run->first_div_dataset, sizeof run->first_div_dataset, "%s", c->calib.what);
      rc_bufprintf(run->first_div_why, sizeof run->first_div_why,
                   "the largest ratio to the run-to-run noise");
      run->first_div_is_dataset = true;
    }
    census_finding(run);
    census_silent(run);
    return true;
  }
  if (v == RC_CHECK_UNDECIDABLE) {
    set_verdict(run, "noise-inconclusive", RC_EXIT_NOISE_UNDECIDABLE, RC_EXIT_UNTESTABLE);
    run->first_div_check = check;
    return true;
  }
  if (v == RC_CHECK_WITHIN_NOISE) {
    set_verdict(run, "within-noise", RC_OK, RC_OK);
    return true;
  }
  return false;
}

void rc_run_verdict(rc_run *run) {
  tally t = count(run, NULL);
  run->census_finding[0] = 0;
  run->verdict_hint[0] = 0;
  run->first_div_check = -1;
  run->first_div_step = -1;
  run->first_div_dataset[0] = 0;
  run->first_div_in_path[0] = 0;
  run->first_div_why[0] = 0;
  run->first_div_largest[0] = 0;
  run->census_silent_check = -1;
  run->census_silent[0] = 0;
  mechanism(run);
  if (run->interrupted) {
    set_verdict(run, "interrupted", RC_RUN_INTERRUPTED, RC_RUN_INTERRUPTED);
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "interrupted: the legs were stopped before the run finished");
    return;
  }
  if (t.legs_failed) {
    const rc_leg *l = &run->legs[t.first_failed_leg];
    set_verdict(run, "leg-failed", RC_EXIT_SOFTWARE, RC_EXIT_UNTESTABLE);
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text, "leg %s failed: %s%s", l->label,
                 l->reason, t.legs_failed > 1 ? " (and other legs failed too)" : "");
    /* what was compared before the failure is still reported */
    if (!find_first_divergence(run, RC_CLASS_AA)) find_first_divergence(run, RC_CLASS_RESUME);
    return;
  }
  if (t.errors) {
    const rc_check *c = &run->checks[t.first_error];
    int code = c->err.code ? c->err.code : RC_EXIT_SOFTWARE;
    set_verdict(run, "error", code, RC_EXIT_UNTESTABLE);
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text, "check %s could not run: %s", c->name,
                 c->err.msg);
    return;
  }
  if (t.aa && save_leg_not_a_prefix(run)) {
    set_verdict(run, "not-a-prefix", RC_EXIT_NOT_PREFIX, RC_EXIT_UNTESTABLE);
    find_first_divergence(run, RC_CLASS_AA);
    not_a_prefix_text(run);
    return;
  }
  if (t.aa) {
    aa_failed_verdict(run);
    return;
  }
  if (t.resume) {
    resume_verdict(run);
    return;
  }
  if (run->opts.noise == RC_NOISE_CALIBRATED && calibrated_verdict(run)) return;
  if (t.arms) {
    set_verdict(run, "arms-differ", RC_EXIT_DIVERGED, RC_EXIT_DIVERGED);
    find_first_divergence(run, RC_CLASS_ARMS);
    rc_bufprintf(run->verdict_text, sizeof run->verdict_text,
                 "fused and unfused gradient accumulation give different results even without a "
                 "resume (ARMS): every leg is wrong alike");
    return;
  }
  set_verdict(run, "identical", RC_OK, RC_OK);
  /* a PyTorch checkpoint is identical by content: its files may differ by
   * construction (DCP's .metadata), so "byte-identical" would claim more */
  bool by_content = false;
  for (int i = 0; i < run->n_checks; i++)
    by_content |= run->checks[i].have_cmp && run->checks[i].cmp.n_by_content > 0;
  rc_bufprintf(run->verdict_text, sizeof run->verdict_text, "%s: A/A identical, RESUME identical",
               by_content ? "every check identical (PyTorch checkpoints by content, every other "
                            "file byte for byte)"
                          : "every check byte-identical");
}
