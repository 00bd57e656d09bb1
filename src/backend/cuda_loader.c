/* cuda_loader.c — rc_cuda_ops(): opens the CUDA backend module on demand.
 *
 * The program links no CUDA library (backend/cuda_module.h says why). The
 * module is looked for, in order: $RC_CUDA_MODULE (an explicit path),
 * beside the executable (the build tree), and ../lib/resumecheck/ from the
 * executable (an installed tree). It is opened once per process and never
 * closed: the CUDA context it creates is torn down by its own exit handler.
 * A module whose ABI or interface hash differs from this program's is
 * refused, naming both, rather than run with a mismatched ops table. */
#include "backend/cuda_module.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"

#ifndef RC_INTERFACE_HASH
#define RC_INTERFACE_HASH "none"
#endif

typedef struct {
  const rc_cuda_module *module;
  char path[PATH_MAX];
  char why[PATH_MAX * 2 + 256];
  char table_why[PATH_MAX + 256]; /* why the module's ops table was refused */
} loader_state;

/* The process's one loaded module (what dlopen itself keeps, remembered). */
static loader_state g_loader;
static pthread_once_t g_loader_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_table_once = PTHREAD_ONCE_INIT;

#ifdef RC_HAVE_CUDA /* only the module's search needs these */
static void exe_dir(char *dir, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
  dir[n > 0 ? n : 0] = 0;
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
}

static const rc_cuda_module *check_module(const rc_cuda_module *m, const char *path, char *why,
                                          size_t cap) {
  if (!m) {
    snprintf(why, cap, "%s: %s() returned nothing", path, RC_CUDA_MODULE_ENTRY);
    return NULL;
  }
  if (m->abi != RC_CUDA_MODULE_ABI || m->ops_size != sizeof(rc_ops) || !m->interface_hash ||
      strcmp(m->interface_hash, RC_INTERFACE_HASH)) {
    snprintf(why, cap,
             "%s was built from other sources than this program (module ABI %d, interface %.12s; "
             "program ABI %d, interface %.12s): rebuild both together",
             path, m->abi, m->interface_hash ? m->interface_hash : "?", RC_CUDA_MODULE_ABI,
             RC_INTERFACE_HASH);
    return NULL;
  }
  return m;
}

static const rc_cuda_module *open_module(const char *path, char *why, size_t cap) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, cap, "cannot open the CUDA module: %s", dlerror());
    return NULL;
  }
  rc_cuda_module_entry_fn entry = (rc_cuda_module_entry_fn)dlsym(h, RC_CUDA_MODULE_ENTRY);
  if (!entry) {
    snprintf(why, cap, "%s is not a resumecheck CUDA module (no %s)", path, RC_CUDA_MODULE_ENTRY);
    dlclose(h);
    return NULL;
  }
  const rc_cuda_module *m = check_module(entry(), path, why, cap);
  if (!m) dlclose(h);
  return m;
}
#endif

static void load_once(void) {
  loader_state *s = &g_loader;
#ifndef RC_HAVE_CUDA
  snprintf(s->why, sizeof s->why,
           "this build has no CUDA backend (nvcc was not found at configure time)");
#else
  const char *env = getenv("RC_CUDA_MODULE");
  char dir[PATH_MAX], beside[PATH_MAX + 64], installed[PATH_MAX + 64];
  exe_dir(dir, sizeof dir);
  snprintf(beside, sizeof beside, "%s/%s", dir, RC_CUDA_MODULE_FILE);
  snprintf(installed, sizeof installed, "%s/../lib/resumecheck/%s", dir, RC_CUDA_MODULE_FILE);
  const char *path = NULL;
  if (env && *env)
    path = env;
  else if (access(beside, F_OK) == 0)
    path = beside;
  else if (access(installed, F_OK) == 0)
    path = installed;
  if (!path) {
    snprintf(s->why, sizeof s->why, "the CUDA module %s is not installed (looked in %s and %s)",
             RC_CUDA_MODULE_FILE, dir, installed);
    return;
  }
  snprintf(s->path, sizeof s->path, "%s", path);
  s->module = open_module(path, s->why, sizeof s->why);
#endif
}

const rc_cuda_module *rc_cuda_module_open(const char **why) {
  pthread_once(&g_loader_once, load_once);
  if (!g_loader.module && why) *why = g_loader.why;
  return g_loader.module;
}

const rc_cuda_module *rc_cuda_module_loaded(void) {
  return g_loader.module;
}

const char *rc_cuda_module_path(void) {
  return g_loader.module ? g_loader.path : NULL;
}

/* Formats, once, why the module's table is refused (written before any
 * caller reads it, however many threads ask). */
static void describe_bad_table(void) {
  const rc_ops *ops = g_loader.module->ops(NULL);
  const char *missing = ops ? rc_ops_missing(ops) : "the table itself";
  snprintf(g_loader.table_why, sizeof g_loader.table_why,
           "the CUDA module %s hands out an ops table with no %s: rebuild it", g_loader.path,
           missing ? missing : "?");
}

const rc_ops *rc_cuda_ops(const char **why) {
  pthread_once(&g_loader_once, load_once);
  if (!g_loader.module) {
    if (why) *why = g_loader.why;
    return NULL;
  }
  const rc_ops *ops = g_loader.module->ops(why);
  /* a table with a hole is refused like a mismatched module, by name */
  if (ops && rc_ops_missing(ops)) {
    pthread_once(&g_table_once, describe_bad_table);
    if (why) *why = g_loader.table_why;
    return NULL;
  }
  return ops;
}

static int dir_has_entries(const char *path) {
  DIR *d = opendir(path);
  if (!d) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d));) found = e->d_name[0] != '.';
  closedir(d);
  return found;
}

int rc_cuda_gpu_visible(void) {
  return dir_has_entries("/proc/driver/nvidia/gpus") || access("/dev/nvidia0", F_OK) == 0;
}
