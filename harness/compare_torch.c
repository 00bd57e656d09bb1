/* compare_torch.c — PyTorch checkpoints inside a comparison: a
 * torch.distributed.checkpoint (DCP) directory, or a pair of torch.save
 * files whose bytes differ, is compared by content by the Python package
 * (`python3 -m resumecheck compare-torch --json`, docs/compare.md "PyTorch
 * formats"), and its differences join this comparison's as if found here.
 *
 * Why a process: DCP's .metadata and torch.save's data.pkl are pickles, and
 * only Python reads a pickle safely (weights_only, an allowlist for DCP's
 * metadata classes); the tensors' bytes are compared there with memcmp and
 * the differing ones come back to this binary's `compare` for the detail
 * (first index, ULPs, NaNs). One process per unit: a run compares a few
 * checkpoints, and torch's import (about a second) is the cost.
 *
 * Where the package is: $RC_PYTHONPATH, else share/resumecheck/python next
 * to an installed binary, else the source tree this binary was built from
 * (RC_PYTHON_PKG_DIR), else whatever the interpreter finds (a pip install).
 * The interpreter is $RC_PYTHON, else python3 on PATH. */
#include "harness/compare_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"

extern char **environ;

#define DCP_METADATA ".metadata"
#define LOG_TAIL 600 /* bytes of the child's output quoted in an error */

bool rc_cmp_is_dcp_dir(const char *dir) {
  char p[4096];
  struct stat st;
  rc_path_join(p, sizeof p, dir, DCP_METADATA);
  return lstat(p, &st) == 0; /* present in any form: a FIFO is refused, not missed */
}

bool rc_cmp_is_dcp_member(const char *name) {
  size_t n = strlen(name), m = strlen(".distcp");
  return !strcmp(name, DCP_METADATA) || (n > m && !strcmp(name + n - m, ".distcp"));
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

bool rc_cmp_is_torch_save(const char *name, const unsigned char *data, size_t size) {
  static const char *exts[] = {".pt", ".pth", ".bin", ".ckpt"};
  bool ext = false;
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) ext |= has_suffix(name, exts[i]);
  if (!ext || size < 4) return false;
  /* a zip (torch >= 1.6) or a pickle of protocol 2+ (the legacy format) */
  return !memcmp(data, "PK\x03\x04", 4) || (data[0] == 0x80 && data[1] >= 2 && data[1] <= 5);
}

/* The directory holding the resumecheck package, or "" for none found. */
static void package_dir(char *out, size_t cap) {
  const char *env = getenv("RC_PYTHONPATH");
  char cand[3][4096] = {{0}};
  if (env && *env) snprintf(cand[0], sizeof cand[0], "%s", env);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      snprintf(cand[1], sizeof cand[1], "%s/../share/resumecheck/python", exe);
    }
  }
#ifdef RC_PYTHON_PKG_DIR
  snprintf(cand[2], sizeof cand[2], "%s", RC_PYTHON_PKG_DIR);
#endif
  out[0] = 0;
  for (int i = 0; i < 3; i++) {
    char init[4200];
    if (!cand[i][0]) continue;
    snprintf(init, sizeof init, "%s/resumecheck/__init__.py", cand[i]);
    if (rc_path_exists(init)) {
      snprintf(out, cap, "%s", cand[i]);
      return;
    }
  }
}

/* environ with PYTHONPATH=dir prepended (dir "" leaves it alone); the
 * strings are owned by *own (free with free_env). */
static char **child_env(const char *dir, char **own) {
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + 2, sizeof *env);
  if (!env) return NULL;
  *own = NULL;
  int k = 0;
  const char *old = getenv("PYTHONPATH");
  for (int i = 0; i < n; i++)
    if (!*dir || strncmp(environ[i], "PYTHONPATH=", 11)) env[k++] = environ[i];
  if (*dir) {
    size_t len = strlen(dir) + (old ? strlen(old) : 0) + 16;
    *own = malloc(len);
    if (!*own) {
      free(env);
      return NULL;
    }
    snprintf(*own, len, "PYTHONPATH=%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    env[k++] = *own;
  }
  env[k] = NULL;
  return env;
}

/* The last LOG_TAIL bytes of the child's output, one line, for a message. */
static void log_tail(const char *path, char *out, size_t cap) {
  out[0] = 0;
  char *data = NULL;
  size_t n = 0;
  rc_err e = {0};
  if (rc_read_file(path, &data, &n, &e)) return;
  while (n && (data[n - 1] == '\n' || data[n - 1] == ' ')) n--;
  size_t start = n > LOG_TAIL ? n - LOG_TAIL : 0;
  const char *last = data + start;
  for (size_t i = start; i < n; i++) /* the last line; earlier ones are a traceback */
    if (data[i] == '\n' && i + 1 < n) last = data + i + 1;
  size_t len = (size_t)(data + n - last);
  snprintf(out, cap, "%.*s", (int)len, last);
  free(data);
}

static rc_diff_kind kind_from_name(const char *s) {
  static const rc_diff_kind kinds[] = {
      RC_DIFF_MISSING_IN_A, RC_DIFF_MISSING_IN_B, RC_DIFF_DTYPE,
      RC_DIFF_SHAPE,        RC_DIFF_ATTRIBUTE,    RC_DIFF_VALUES,
      RC_DIFF_BYTES,        RC_DIFF_SHA256,       RC_DIFF_INFORMATIONAL};
  for (size_t i = 0; s && i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(s, rc_diff_kind_name(kinds[i]))) return kinds[i];
  return RC_DIFF_VALUES;
}

static double num_or(const rc_json *o, const char *key, double dflt) {
  const rc_json *v = rc_json_get(o, key);
  return v && v->type == RC_JSON_NUM ? v->num : dflt;
}

static int64_t i64_or(const rc_json *o, const char *key, int64_t dflt) {
  int64_t v;
  return rc_json_get_i64(o, key, &v) ? v : dflt;
}

/* The child's --json into c: each difference with its file relative to
 * the compared roots (rel, then the rank file the child names). */
static int merge_json(rc_cmp_ctx *c, const char *rel, const char *jpath, const char *what, bool dcp,
                      rc_err *err) {
  char *text = NULL;
  size_t n = 0;
  int rc = rc_read_file(jpath, &text, &n, err);
  if (rc) return rc;
  char msg[256];
  rc_json *j = rc_json_parse(text, n, msg, sizeof msg);
  free(text);
  if (!j)
    return rc_fail(err, RC_EXIT_SOFTWARE, "%s: compare-torch wrote malformed JSON: %s", what, msg);
  rc_compare_result *res = c->res;
  res->n_datasets_compared += (int)i64_or(j, "datasets_compared", 0);
  if (dcp) { /* a file pair was counted by the caller, which read its bytes */
    res->n_files_compared += (int)i64_or(j, "files_compared", 0);
    res->n_files_identical += (int)i64_or(j, "files_identical", 0);
  }
  res->n_by_content++;
  c->n_ignored += (int)i64_or(j, "n_ignored", 0);
  int failing_before = res->n_failing;
  const rc_json *diffs = rc_json_get(j, "diffs");
  for (int i = 0; diffs && diffs->type == RC_JSON_ARR && i < diffs->nkids; i++) {
    const rc_json *d = &diffs->kids[i];
    const char *file = rc_json_get_str(d, "file"), *object = rc_json_get_str(d, "object");
    const char *detail = rc_json_get_str(d, "detail");
    char where[1024];
    if (file && *file)
      snprintf(where, sizeof where, "%s%s%s", rel, *rel ? "/" : "", file);
    else
      snprintf(where, sizeof where, "%s", rel);
    rc_diff *x = rc_cmp_add(c, kind_from_name(rc_json_get_str(d, "kind")), where,
                            object ? object : "", "%s", detail ? detail : "");
    if (!x) continue; /* ignored */
    x->n_elements = i64_or(d, "n_elements", 0);
    x->n_different = i64_or(d, "n_different", 0);
    x->first_index = i64_or(d, "first_index", -1);
    x->max_abs = num_or(d, "max_abs", 0);
    x->max_rel = num_or(d, "max_rel", 0);
    x->max_mag = num_or(d, "max_mag", 0);
    x->sum_sq = num_or(d, "sum_sq", 0);
    x->max_ulp = (uint64_t)i64_or(d, "max_ulp", 0);
    x->n_signed_zero_only = i64_or(d, "n_signed_zero_only", 0);
    x->n_nan_payload_only = i64_or(d, "n_nan_payload_only", 0);
    x->n_nan_mismatch = i64_or(d, "n_nan_mismatch", 0);
  }
  if (res->n_failing == failing_before) res->n_by_content_equal++;
  rc_json_free(j);
  return RC_OK;
}

int rc_cmp_torch(rc_cmp_ctx *c, const char *rel, const char *pa, const char *pb, bool dcp,
                 rc_err *err) {
  const char *what_kind = dcp ? "a torch.distributed.checkpoint directory" : "a torch.save file";
  char what[1200];
  snprintf(what, sizeof what, "%s (%s)", *rel ? rel : pa, what_kind);
  char tmpl[4096];
  const char *tmpdir = getenv("TMPDIR");
  snprintf(tmpl, sizeof tmpl, "%s/rc-compare-torch.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(tmpl))
    return rc_fail(err, RC_EXIT_IOERR, "%s: cannot make a temporary directory %s: %s", what, tmpl,
                   strerror(errno));
  char jpath[4200], lpath[4200], self[PATH_MAX], pkg[4096];
  snprintf(jpath, sizeof jpath, "%s/compare.json", tmpl);
  snprintf(lpath, sizeof lpath, "%s/log.txt", tmpl);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  package_dir(pkg, sizeof pkg);
  const char *py = getenv("RC_PYTHON");
  if (!py || !*py) py = "python3";
  char *argv[] = {(char *)py,      "-m",     "resumecheck", "compare-torch", (char *)pa,
                  (char *)pb,      "--json", jpath,         "--max-lines",   "0",
                  "--resumecheck", self,     NULL};
  if (!self[0]) argv[10] = NULL; /* no /proc: compare-torch looks for RC_BIN or PATH */
  char *own = NULL;
  char **env = child_env(pkg, &own);
  posix_spawn_file_actions_t fa;
  int rc = RC_OK, status = 0;
  pid_t pid = -1;
  if (!env || posix_spawn_file_actions_init(&fa)) {
    free(env);
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    goto out;
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, lpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  int se = posix_spawnp(&pid, py, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  free(own);
  if (se) {
    rc = rc_fail(err, RC_EXIT_USAGE,
                 "%s: comparing it needs Python with torch and the resumecheck package, and "
                 "%s cannot be run (%s): set RC_PYTHON (docs/compare.md, \"PyTorch formats\")",
                 what, py, strerror(se));
    goto out;
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      rc = rc_fail(err, RC_EXIT_SOFTWARE, "%s: waitpid: %s", what, strerror(errno));
      goto out;
    }
  char tail[LOG_TAIL + 1];
  log_tail(lpath, tail, sizeof tail);
  /* 0 and 1 are compare-torch's verdicts only with its JSON written: an
   * interpreter that cannot import the package exits 1 too */
  bool verdict = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1) &&
                 rc_path_exists(jpath);
  if (!WIFEXITED(status)) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "%s: compare-torch died of signal %d", what,
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  } else if (verdict) {
    rc = merge_json(c, rel, jpath, what, dcp, err);
  } else if (WEXITSTATUS(status) == RC_EXIT_DATAERR || WEXITSTATUS(status) == RC_EXIT_NOINPUT) {
    rc = rc_fail(err, WEXITSTATUS(status), "%s", tail[0] ? tail : what);
  } else if (strstr(tail, "No module named") || strstr(tail, "cannot import torch")) {
    rc = rc_fail(err, RC_EXIT_USAGE,
                 "%s: comparing it needs Python with torch and the resumecheck package (%s: %s): "
                 "pip install torch and the package, or set RC_PYTHON / RC_PYTHONPATH",
                 what, py, tail);
  } else {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "%s: compare-torch exited %d: %s", what,
                 WEXITSTATUS(status), tail);
  }
out:
  unlink(jpath);
  unlink(lpath);
  rmdir(tmpl);
  return rc;
}
