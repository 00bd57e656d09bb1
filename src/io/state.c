/* state.c — the plain tensor list io saves and loads (see state.h).
 *
 * Sizes are computed in one place so the writer, the loader and the manifest
 * agree on how many bytes a tensor has. The list only borrows data buffers. */
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rc_dtype_name(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return "float32";
  case RC_DT_F64:
    return "float64";
  case RC_DT_I64:
    return "int64";
  case RC_DT_U64:
    return "uint64";
  case RC_DT_I32:
    return "int32";
  case RC_DT_I8:
    return "int8";
  }
  return "unknown";
}

size_t rc_dtype_size(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return 4;
  case RC_DT_F64:
    return 8;
  case RC_DT_I64:
    return 8;
  case RC_DT_U64:
    return 8;
  case RC_DT_I32:
    return 4;
  case RC_DT_I8:
    return 1;
  }
  return 0;
}

int64_t rc_tensor_numel(const rc_tensor *t) {
  int64_t n = 1; /* a 0-d (scalar) tensor has one element */
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t rc_tensor_nbytes(const rc_tensor *t) {
  return (size_t)rc_tensor_numel(t) * rc_dtype_size(t->dtype);
}

/* Bad arguments here are programming errors in the caller (a path longer
 * than the fixed field, a rank the format cannot hold), so they abort with a
 * message rather than travel on as an error code. */
static void die(const char *what, const char *path) {
  fprintf(stderr, "rc_state_add: %s (%s)\n", what, path);
  abort();
}

rc_tensor *rc_state_add(rc_state *s, const char *path, rc_dtype dt, int ndim, const int64_t *shape,
                        void *data) {
  if (strlen(path) >= RC_PATH_MAX) die("path too long", path);
  if (ndim < 0 || ndim > RC_MAX_DIMS) die("ndim out of range", path);
  if (rc_dtype_size(dt) == 0) die("unknown dtype", path);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) die("negative dimension", path);
  if (s->count == s->capacity) {
    int cap = s->capacity ? 2 * s->capacity : 16;
    rc_tensor *t = realloc(s->tensors, (size_t)cap * sizeof *t);
    if (!t) die("out of memory", path);
    s->tensors = t;
    s->capacity = cap;
  }
  rc_tensor *t = &s->tensors[s->count++];
  memset(t, 0, sizeof *t);
  memcpy(t->path, path, strlen(path) + 1);
  t->dtype = dt;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->data = data;
  return t;
}

rc_tensor *rc_state_find(const rc_state *s, const char *path) {
  for (int i = 0; i < s->count; i++)
    if (!strcmp(s->tensors[i].path, path)) return &s->tensors[i];
  return NULL;
}

void rc_state_free(rc_state *s) {
  free(s->tensors);
  s->tensors = NULL;
  s->count = s->capacity = 0;
}
