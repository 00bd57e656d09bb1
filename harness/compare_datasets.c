/* compare_datasets.c — the slow path: two HDF5 files compared object by
 * object through the HDF5 API (docs/design.md §7).
 *
 * It runs only when two shards are known to differ as bytes (or with
 * --deep), and its job is to say *what* differs: which links exist on one
 * side only, which objects changed kind, dtype or shape, which attributes
 * differ, and for each dataset with different values how many elements,
 * where first, and by how much. It is stricter than h5diff on purpose: a
 * dtype change with equal values, a shape change and a NaN payload are all
 * differences, because resume exactness is a statement about bytes.
 *
 * Values are compared as the bytes stored, never converted: a contiguous
 * dataset (what this tool's shards hold) is compared in place in the
 * memory-mapped files, skipped when it lies inside a prefix already known
 * equal; any other layout is read in blocks of whole rows with the file's
 * own type as the memory type. Elements are interpreted (byte-swapped when
 * the file's order is not the host's) only to describe a difference. */
#include "harness/compare_internal.h"

#include <hdf5.h>

#include "base/fsutil.h"
#include "harness/h5_bounds.h"
#include "io/checkpoint.h"
#include "io/h5_type.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK_BYTES ((size_t)32 << 20) /* per side, per read */

/* ---------------------------------------------------------------------------
 * Every link of a file, in hierarchical name order. */

typedef enum { OBJ_GROUP, OBJ_DATASET, OBJ_DATATYPE, OBJ_SOFT, OBJ_EXTERNAL, OBJ_OTHER } obj_kind;

static const char *obj_kind_name(obj_kind k) {
  static const char *names[] = {"group",     "dataset",       "named datatype",
                                "soft link", "external link", "object"};
  return names[k];
}

typedef struct {
  char *path; /* "/model/w", "/" for the root group */
  obj_kind kind;
  char *target; /* soft and external links: where they point */
} obj_entry;

typedef struct {
  obj_entry *v;
  int n, cap;
} obj_list;

static void obj_list_free(obj_list *l) {
  for (int i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].target);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (!d) {
    fprintf(stderr, "resumecheck: out of memory\n");
    abort();
  }
  memcpy(d, s, n);
  return d;
}

static obj_entry *obj_push(obj_list *l, const char *path, obj_kind kind) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    obj_entry *v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) {
      fprintf(stderr, "resumecheck: out of memory\n");
      abort();
    }
    l->v = v;
    l->cap = cap;
  }
  obj_entry *e = &l->v[l->n++];
  e->path = xstrdup(path);
  e->kind = kind;
  e->target = NULL;
  return e;
}

static herr_t visit_link(hid_t group, const char *name, const H5L_info_t *info, void *data) {
  obj_list *l = data;
  char path[1024];
  if (snprintf(path, sizeof path, "/%s", name) >= (int)sizeof path) return -1;
  if (info->type == H5L_TYPE_HARD) {
    H5O_info_t oi;
    if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return -1;
    obj_kind k = oi.type == H5O_TYPE_GROUP            ? OBJ_GROUP
                 : oi.type == H5O_TYPE_DATASET        ? OBJ_DATASET
                 : oi.type == H5O_TYPE_NAMED_DATATYPE ? OBJ_DATATYPE
                                                      : OBJ_OTHER;
    obj_push(l, path, k);
    return 0;
  }
  obj_entry *e = obj_push(l, path, info->type == H5L_TYPE_SOFT ? OBJ_SOFT : OBJ_EXTERNAL);
  size_t n = info->u.val_size;
  char *val = calloc(n + 1, 1);
  if (!val || H5Lget_val(group, name, val, n, H5P_DEFAULT) < 0) {
    free(val);
    return -1;
  }
  if (info->type == H5L_TYPE_EXTERNAL) {
    const char *file = NULL, *obj = NULL;
    unsigned flags;
    if (H5Lunpack_elink_val(val, n, &flags, &file, &obj) < 0) {
      free(val);
      return -1;
    }
    size_t m = strlen(file) + strlen(obj) + 2;
    e->target = malloc(m);
    if (e->target) snprintf(e->target, m, "%s:%s", file, obj);
    free(val);
  } else {
    e->target = val;
  }
  return e->target ? 0 : -1;
}

/* strcmp with '/' sorting before every other character, so that a group's
 * members follow the group directly ("/a", "/a/x", "/a.b"). */
static int path_cmp(const char *a, const char *b) {
  for (;; a++, b++) {
    int ca = *a == '/' ? 1 : *a ? (unsigned char)*a + 1 : 0;
    int cb = *b == '/' ? 1 : *b ? (unsigned char)*b + 1 : 0;
    if (ca != cb) return ca - cb;
    if (!ca) return 0;
  }
}

static int obj_entry_cmp(const void *x, const void *y) {
  return path_cmp(((const obj_entry *)x)->path, ((const obj_entry *)y)->path);
}

static int list_objects(hid_t file, obj_list *l) {
  obj_push(l, "/", OBJ_GROUP);
  if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_link, l) < 0) return -1;
  qsort(l->v, (size_t)l->n, sizeof *l->v, obj_entry_cmp);
  return 0;
}

/* ---------------------------------------------------------------------------
 * Element formats: how to interpret a stored element to describe it. */

bool rc_cmp_host_is_le(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static rc_cmp_el_fmt el_fmt_of(hid_t t) {
  rc_cmp_el_fmt f = {RC_EL_RAW, H5Tget_size(t), false};
  H5T_class_t cls = H5Tget_class(t);
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    H5T_order_t o = H5Tget_order(t);
    f.swap = (o == H5T_ORDER_BE) == rc_cmp_host_is_le();
  }
  if (cls == H5T_INTEGER && (f.size == 1 || f.size == 2 || f.size == 4 || f.size == 8)) {
    f.kind = H5Tget_sign(t) == H5T_SGN_2 ? RC_EL_INT : RC_EL_UINT;
  } else if (cls == H5T_FLOAT) {
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0) {
      if (f.size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23)
        f.kind = RC_EL_F32;
      if (f.size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52)
        f.kind = RC_EL_F64;
      if (f.size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10)
        f.kind = RC_EL_F16;
      if (f.size == 2 && spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7)
        f.kind = RC_EL_BF16;
    }
  } else if (cls == H5T_STRING) {
    f.kind = RC_EL_STR;
  }
  return f;
}

/* The element's bits as an unsigned integer in host order. */
static uint64_t el_bits(const rc_cmp_el_fmt *f, const unsigned char *p) {
  unsigned char tmp[8] = {0}; /* zeroed: -O3 cannot see that size <= 8 is filled */
  memcpy(tmp, p, f->size);
  if (f->swap)
    for (size_t i = 0; i < f->size / 2; i++) {
      unsigned char c = tmp[i];
      tmp[i] = tmp[f->size - 1 - i];
      tmp[f->size - 1 - i] = c;
    }
  switch (f->size) {
  case 1:
    return tmp[0];
  case 2: {
    uint16_t v;
    memcpy(&v, tmp, 2);
    return v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, tmp, 4);
    return v;
  }
  default: {
    uint64_t v;
    memcpy(&v, tmp, 8);
    return v;
  }
  }
}

static int64_t sign_extend(uint64_t v, size_t size) {
  if (size == 8) return (int64_t)v;
  unsigned shift = (unsigned)(64 - 8 * size);
  return (int64_t)(v << shift) >> shift;
}

/* binary16 to double, exactly (every half is a double). */
static double half_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double x = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
  return h & 0x8000 ? -x : x;
}

static double el_double(const rc_cmp_el_fmt *f, uint64_t bits) {
  switch (f->kind) {
  case RC_EL_F16:
    return half_double((uint16_t)bits);
  case RC_EL_BF16: {
    uint32_t u = (uint32_t)bits << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
  }
  case RC_EL_F32: {
    uint32_t u = (uint32_t)bits;
    float x;
    memcpy(&x, &u, 4);
    return x;
  }
  case RC_EL_F64: {
    double x;
    memcpy(&x, &bits, 8);
    return x;
  }
  case RC_EL_INT:
    return (double)sign_extend(bits, f->size);
  default:
    return (double)bits;
  }
}

/* Maps float bits to integers whose order is the order of the values, with
 * -0.0 and +0.0 both at 0: sign and magnitude become a signed magnitude.
 * The distance between two mapped values is the number of representable
 * floats between them (the ULP distance). Branch-free: signs are random in
 * real data, and a mispredicted branch here cost more than the arithmetic. */
static int64_t ordered_f32(uint32_t u) {
  int64_t mag = u & 0x7fffffffu, neg = -(int64_t)(u >> 31);
  return (mag ^ neg) - neg;
}
static int64_t ordered_f16(uint16_t u) { /* binary16 and bfloat16 alike */
  int64_t mag = u & 0x7fff, neg = -(int64_t)(u >> 15);
  return (mag ^ neg) - neg;
}
static int64_t ordered_f64(uint64_t u) {
  int64_t mag = (int64_t)(u & 0x7fffffffffffffffull), neg = -(int64_t)(u >> 63);
  return (mag ^ neg) - neg;
}
static uint64_t distance(int64_t a, int64_t b) {
  uint64_t up = (uint64_t)a - (uint64_t)b, down = (uint64_t)b - (uint64_t)a;
  return a >= b ? up : down;
}

/* Writes a short, human-readable rendering of one element. */
static void el_format(const rc_cmp_el_fmt *f, const unsigned char *p, char *out, size_t cap) {
  switch (f->kind) {
  case RC_EL_F32:
  case RC_EL_F64:
  case RC_EL_F16:
  case RC_EL_BF16: {
    uint64_t bits = el_bits(f, p);
    double x = el_double(f, bits);
    if (isnan(x))
      snprintf(out, cap, "nan(0x%" PRIx64 ")", bits);
    else
      snprintf(out, cap, "%.9g", x);
    return;
  }
  case RC_EL_INT:
    snprintf(out, cap, "%" PRId64, sign_extend(el_bits(f, p), f->size));
    return;
  case RC_EL_UINT:
    snprintf(out, cap, "%" PRIu64, el_bits(f, p));
    return;
  case RC_EL_STR: {
    size_t n = strnlen((const char *)p, f->size);
    snprintf(out, cap, "\"%.*s\"", (int)(n > 48 ? 48 : n), (const char *)p);
    return;
  }
  default: {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < f->size && i < 16 && len + 3 < cap; i++)
      len += (size_t)snprintf(out + len, cap - len, "%02x", p[i]);
    if (f->size > 16 && len + 4 < cap) snprintf(out + len, cap - len, "...");
  }
  }
}

/* ---------------------------------------------------------------------------
 * Names for shapes, as people read them (dtypes: io/h5_type.h). */

typedef struct {
  H5S_class_t cls;
  int ndim;
  hsize_t dims[H5S_MAX_RANK];
  int64_t npoints;
} shape_t;

static int shape_of(hid_t space, shape_t *s) {
  memset(s, 0, sizeof *s);
  s->cls = H5Sget_simple_extent_type(space);
  int nd = H5Sget_simple_extent_ndims(space);
  hssize_t np = H5Sget_simple_extent_npoints(space);
  if (s->cls == H5S_NO_CLASS || nd < 0 || np < 0) return -1;
  s->ndim = nd;
  s->npoints = np;
  if (nd > 0 && H5Sget_simple_extent_dims(space, s->dims, NULL) < 0) return -1;
  return 0;
}

static bool shape_equal(const shape_t *a, const shape_t *b) {
  if (a->cls != b->cls || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static void shape_name(const shape_t *s, char *out, size_t cap) {
  if (s->cls == H5S_NULL) {
    snprintf(out, cap, "(null)");
    return;
  }
  size_t len = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < s->ndim && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%llu", i ? "," : "",
                            (unsigned long long)s->dims[i]);
  if (len < cap) snprintf(out + len, cap - len, "]");
}

/* "[2,17]" for flat index 81 of a [5,32] shape. */
static void index_name(const shape_t *s, int64_t flat, char *out, size_t cap) {
  hsize_t idx[H5S_MAX_RANK];
  uint64_t rest = (uint64_t)flat;
  for (int i = s->ndim - 1; i >= 0; i--) {
    idx[i] = s->dims[i] ? rest % s->dims[i] : 0;
    rest = s->dims[i] ? rest / s->dims[i] : 0;
  }
  size_t len = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < s->ndim && len < cap; i++)
    len +=
        (size_t)snprintf(out + len, cap - len, "%s%llu", i ? "," : "", (unsigned long long)idx[i]);
  if (len < cap) snprintf(out + len, cap - len, "]");
}

/* ---------------------------------------------------------------------------
 * Reading whole rows (dimension 0) of a dataset without conversion. */

static herr_t read_rows(hid_t dset, hid_t memtype, const shape_t *s, hsize_t row0, hsize_t nrows,
                        void *buf) {
  if (s->ndim == 0) return H5Dread(dset, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
  hsize_t n = nrows;
  start[0] = row0;
  count[0] = nrows;
  for (int i = 1; i < s->ndim; i++) {
    count[i] = s->dims[i];
    n *= s->dims[i];
  }
  hid_t fs = H5Dget_space(dset);
  if (fs < 0) return -1;
  hid_t ms = H5Screate_simple(1, &n, NULL);
  herr_t st = -1;
  if (ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
    st = H5Dread(dset, memtype, ms, fs, H5P_DEFAULT, buf);
  if (ms >= 0) H5Sclose(ms);
  H5Sclose(fs);
  return st;
}

/* Row blocking shared by the value loops: rows per block and elements per row. */
typedef struct {
  hsize_t rows, rows_per_block, row_elems;
} blocking;

static blocking blocking_of(const shape_t *s, size_t elem_size) {
  blocking b = {1, 1, 1};
  if (s->ndim == 0) return b;
  b.rows = s->dims[0];
  for (int i = 1; i < s->ndim; i++) b.row_elems *= s->dims[i];
  size_t row_bytes = (size_t)b.row_elems * elem_size;
  b.rows_per_block = row_bytes ? BLOCK_BYTES / row_bytes : b.rows;
  if (b.rows_per_block < 1) b.rows_per_block = 1; /* one row larger than a block: read it whole */
  if (b.rows_per_block > b.rows) b.rows_per_block = b.rows;
  return b;
}

/* ---------------------------------------------------------------------------
 * One pair of files being compared. */

typedef struct {
  rc_cmp_ctx *c;
  const char *file; /* relative name for diffs */
  const char *path_a, *path_b;
  hid_t fa, fb;
  rc_cmp_known k; /* all-NULL when nothing is known */
  rc_err *err;
} pair_t;

static int h5fail(pair_t *p, const char *what, const char *object) {
  return rc_fail(p->err, RC_EXIT_DATAERR, "%s / %s: cannot %s %s (corrupt or unreadable HDF5)",
                 p->path_a, p->path_b, what, object);
}

static void note_numeric(rc_cmp_stats *st, double x, double y) {
  double d = fabs(x - y);
  double m = fmax(fabs(x), fabs(y));
  double rel = isinf(d) ? INFINITY : d / m; /* m > 0: x != y and not both zero */
  if (d > st->max_abs) st->max_abs = d;
  if (m > st->max_mag) st->max_mag = m;
  if (rel > st->max_rel) st->max_rel = rel;
}

/* The first differing element, in both renderings. */
static void note_first(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *pa,
                       const unsigned char *pb, int64_t index) {
  st->first_index = index;
  el_format(f, pa, st->first_a, sizeof st->first_a);
  el_format(f, pb, st->first_b, sizeof st->first_b);
}

/* Floats are what shards hold, and two unrelated checkpoints differ in every
 * element, so the two IEEE widths get a tight loop each with the statistics
 * in locals (~3 ns per differing element instead of ~30 through the generic
 * path). Categories, in order: NaN payload only, NaN on one side, sign of
 * zero only, else a numeric difference with |a-b|, relative and ULP size. */
/* Running statistics of one float block, in locals of the caller's loop
 * (kept out of rc_cmp_stats so the compiler can hold them in registers). */
typedef struct {
  double max_abs, max_rel, max_mag, sum_sq;
  uint64_t max_ulp;
  int64_t nz, npay, nmis;
} float_tally;

/* One differing pair, already decoded: NaN and signed-zero cases are counted
 * as such, everything else updates |a-b|, the relative difference and ULPs. */
static inline void tally_pair(float_tally *t, double x, double y, uint64_t ulp) {
  bool nx = x != x, ny = y != y;
  if (nx || ny) {
    t->npay += nx && ny;
    t->nmis += nx != ny;
    return;
  }
  if (x == 0 && y == 0) {
    t->nz++;
    return;
  }
  double d = fabs(x - y), ax = fabs(x), ay = fabs(y), m = ax > ay ? ax : ay;
  if (d > t->max_abs) t->max_abs = d;
  if (m > t->max_mag) t->max_mag = m;
  t->sum_sq += d * d;
  if (isinf(d))
    t->max_rel = INFINITY;
  else if (d > t->max_rel * m) /* divide only for a new maximum */
    t->max_rel = d / m;
  if (ulp > t->max_ulp) t->max_ulp = ulp;
}

static void tally_begin(float_tally *t, const rc_cmp_stats *st) {
  *t = (float_tally){st->max_abs, st->max_rel, st->max_mag, st->sum_sq, st->max_ulp, 0, 0, 0};
}

static void tally_end(rc_cmp_stats *st, const float_tally *t, int64_t ndiff) {
  st->max_abs = t->max_abs;
  st->max_rel = t->max_rel;
  st->max_mag = t->max_mag;
  st->sum_sq = t->sum_sq;
  st->max_ulp = t->max_ulp;
  st->n_different = ndiff;
  st->n_signed_zero += t->nz;
  st->n_nan_payload += t->npay;
  st->n_nan_mismatch += t->nmis;
}

static void scan_f32(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *a,
                     const unsigned char *b, size_t n, int64_t base) {
  float_tally t;
  tally_begin(&t, st);
  int64_t ndiff = st->n_different;
  for (size_t i = 0; i < n; i++) {
    uint32_t ua, ub;
    memcpy(&ua, a + 4 * i, 4);
    memcpy(&ub, b + 4 * i, 4);
    if (ua == ub) continue;
    if (ndiff++ == 0) note_first(st, f, a + 4 * i, b + 4 * i, base + (int64_t)i);
    if (f->swap) {
      ua = __builtin_bswap32(ua);
      ub = __builtin_bswap32(ub);
    }
    float xf, yf;
    memcpy(&xf, &ua, 4);
    memcpy(&yf, &ub, 4);
    tally_pair(&t, xf, yf, distance(ordered_f32(ua), ordered_f32(ub)));
  }
  tally_end(st, &t, ndiff);
}

static void scan_f64(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *a,
                     const unsigned char *b, size_t n, int64_t base) {
  float_tally t;
  tally_begin(&t, st);
  int64_t ndiff = st->n_different;
  for (size_t i = 0; i < n; i++) {
    uint64_t ua, ub;
    memcpy(&ua, a + 8 * i, 8);
    memcpy(&ub, b + 8 * i, 8);
    if (ua == ub) continue;
    if (ndiff++ == 0) note_first(st, f, a + 8 * i, b + 8 * i, base + (int64_t)i);
    if (f->swap) {
      ua = __builtin_bswap64(ua);
      ub = __builtin_bswap64(ub);
    }
    double x, y;
    memcpy(&x, &ua, 8);
    memcpy(&y, &ub, 8);
    tally_pair(&t, x, y, distance(ordered_f64(ua), ordered_f64(ub)));
  }
  tally_end(st, &t, ndiff);
}

/* The two 16-bit float formats: decoded one element at a time (they are
 * rare in state files that differ wholesale, so no tight loop of their own). */
static void scan_f16(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *a,
                     const unsigned char *b, size_t n, int64_t base) {
  float_tally t;
  tally_begin(&t, st);
  int64_t ndiff = st->n_different;
  for (size_t i = 0; i < n; i++) {
    uint16_t ua = (uint16_t)el_bits(f, a + 2 * i), ub = (uint16_t)el_bits(f, b + 2 * i);
    if (ua == ub) continue;
    if (ndiff++ == 0) note_first(st, f, a + 2 * i, b + 2 * i, base + (int64_t)i);
    tally_pair(&t, el_double(f, ua), el_double(f, ub), distance(ordered_f16(ua), ordered_f16(ub)));
  }
  tally_end(st, &t, ndiff);
}

/* Floats in a loop of their own; integers (|a-b| as the "ULP" distance),
 * strings and opaque types here. */
void rc_cmp_scan(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *a,
                 const unsigned char *b, size_t n, int64_t base) {
  if (f->kind == RC_EL_F32) return scan_f32(st, f, a, b, n, base);
  if (f->kind == RC_EL_F64) return scan_f64(st, f, a, b, n, base);
  if (f->kind == RC_EL_F16 || f->kind == RC_EL_BF16) return scan_f16(st, f, a, b, n, base);
  const size_t es = f->size;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *pa = a + i * es, *pb = b + i * es;
    if (!memcmp(pa, pb, es)) continue;
    if (st->n_different++ == 0) note_first(st, f, pa, pb, base + (int64_t)i);
    if (f->kind == RC_EL_INT || f->kind == RC_EL_UINT) {
      uint64_t ua = el_bits(f, pa), ub = el_bits(f, pb);
      note_numeric(st, el_double(f, ua), el_double(f, ub));
      uint64_t dist = f->kind == RC_EL_INT ? distance(sign_extend(ua, es), sign_extend(ub, es))
                                           : (ua > ub ? ua - ub : ub - ua);
      if (dist > st->max_ulp) st->max_ulp = dist;
    }
  }
}

rc_diff *rc_cmp_add_values(rc_cmp_ctx *c, const char *file, const char *object, const char *dtname,
                           const char *shape, const char *index, int64_t n_elements,
                           const rc_cmp_el_fmt *f, const rc_cmp_stats *st) {
  char extra[256] = "";
  size_t len = 0;
  bool numeric = f->kind != RC_EL_STR && f->kind != RC_EL_RAW;
  bool is_float =
      f->kind == RC_EL_F32 || f->kind == RC_EL_F64 || f->kind == RC_EL_F16 || f->kind == RC_EL_BF16;
  if (numeric) {
    int64_t plain = st->n_different - st->n_signed_zero - st->n_nan_payload - st->n_nan_mismatch;
    if (plain > 0)
      len += (size_t)snprintf(extra + len, sizeof extra - len, "; max |a-b| %.3g, max rel %.3g",
                              st->max_abs, st->max_rel);
    if (plain > 0 && is_float)
      len += (size_t)snprintf(extra + len, sizeof extra - len, ", max ULP %" PRIu64, st->max_ulp);
    if (st->n_signed_zero && len < sizeof extra)
      len += (size_t)snprintf(extra + len, sizeof extra - len, "; %" PRId64 " sign-of-zero only",
                              st->n_signed_zero);
    if (st->n_nan_payload && len < sizeof extra)
      len += (size_t)snprintf(extra + len, sizeof extra - len, "; %" PRId64 " NaN payload only",
                              st->n_nan_payload);
    if (st->n_nan_mismatch && len < sizeof extra)
      snprintf(extra + len, sizeof extra - len, "; %" PRId64 " NaN on one side",
               st->n_nan_mismatch);
  }
  rc_diff *d = rc_cmp_add(
      c, RC_DIFF_VALUES, file, object,
      "%s%s: %" PRId64 " of %" PRId64 " elements differ, first at %s: %s vs %s%s", dtname, shape,
      st->n_different, n_elements, index, st->first_a, st->first_b, extra);
  if (!d) return NULL;
  d->n_elements = n_elements;
  d->n_different = st->n_different;
  d->first_index = st->first_index;
  d->max_abs = st->max_abs;
  d->max_rel = st->max_rel;
  d->max_mag = st->max_mag;
  d->sum_sq = st->sum_sq;
  d->max_ulp = st->max_ulp;
  d->n_signed_zero_only = st->n_signed_zero;
  d->n_nan_payload_only = st->n_nan_payload;
  d->n_nan_mismatch = st->n_nan_mismatch;
  return d;
}

static void record_values_diff(pair_t *p, const char *path, const char *dtname, const shape_t *s,
                               const rc_cmp_el_fmt *f, const rc_cmp_stats *st) {
  char shp[256], idx[256];
  shape_name(s, shp, sizeof shp);
  index_name(s, st->first_index, idx, sizeof idx);
  rc_cmp_add_values(p->c, p->file, path, dtname, shp, idx, s->npoints, f, st);
}

/* Variable-length strings: compared as C strings, element by element. */
static int compare_vlen_strings(pair_t *p, const char *path, hid_t da, hid_t db, hid_t ftype,
                                hid_t space, const shape_t *s, const char *dtname) {
  int rc = RC_OK;
  hid_t mt = H5Tcopy(H5T_C_S1);
  char **va = calloc((size_t)s->npoints, sizeof *va), **vb = calloc((size_t)s->npoints, sizeof *vb);
  bool read_a = false, read_b = false;
  if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(ftype)) < 0) {
    rc = h5fail(p, "make a string type for", path);
    goto done;
  }
  if (!va || !vb) {
    rc = rc_fail(p->err, RC_EXIT_SOFTWARE, "out of memory");
    goto done;
  }
  read_a = H5Dread(da, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, va) >= 0;
  read_b = read_a && H5Dread(db, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, vb) >= 0;
  if (!read_a || !read_b) {
    rc = h5fail(p, "read", path);
    goto done;
  }
  rc_cmp_stats st = {0};
  st.first_index = -1;
  for (int64_t i = 0; i < s->npoints; i++) {
    const char *x = va[i] ? va[i] : "", *y = vb[i] ? vb[i] : "";
    if (!strcmp(x, y)) continue;
    if (st.n_different++ == 0) {
      st.first_index = i;
      snprintf(st.first_a, sizeof st.first_a, "\"%.48s\"", x);
      snprintf(st.first_b, sizeof st.first_b, "\"%.48s\"", y);
    }
  }
  rc_cmp_el_fmt f = {RC_EL_STR, 0, false};
  if (st.n_different) record_values_diff(p, path, dtname, s, &f, &st);
done:
  if (read_a) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, va);
  if (read_b) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, vb);
  free(va);
  free(vb);
  if (mt >= 0) H5Tclose(mt);
  return rc;
}

/* Where a dataset's bytes are in its file, when they are one contiguous,
 * unfiltered, allocated run of exactly nbytes; false otherwise. */
static bool contiguous_extent(hid_t dset, size_t nbytes, int64_t *offset) {
  hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl < 0) return false;
  bool ok = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
            H5Pget_external_count(dcpl) == 0;
  H5Pclose(dcpl);
  if (!ok) return false;
  haddr_t addr = H5Dget_offset(dset);
  if (addr == HADDR_UNDEF || H5Dget_storage_size(dset) != nbytes) return false;
  *offset = (int64_t)addr;
  return true;
}

/* Same dtype, same shape: the stored bytes, block by block. */
static int compare_values(pair_t *p, const char *path, hid_t da, hid_t db, hid_t ftype, hid_t space,
                          const shape_t *s, const char *dtname) {
  if (s->npoints == 0 || p->k.equal_prefix == INT64_MAX) return RC_OK; /* equal files */
  if (H5Tis_variable_str(ftype) > 0)
    return compare_vlen_strings(p, path, da, db, ftype, space, s, dtname);
  if (H5Tdetect_class(ftype, H5T_VLEN) > 0) {
    /* Only reached when the files differ as bytes; rather than guess, say so. */
    rc_cmp_add(p->c, RC_DIFF_VALUES, p->file, path,
               "%s: values not compared (variable-length type other than string)", dtname);
    return RC_OK;
  }
  rc_cmp_el_fmt f = el_fmt_of(ftype);
  rc_cmp_stats st = {0};
  st.first_index = -1;
  size_t nbytes = (size_t)s->npoints * f.size;
  int64_t oa, ob;
  if (contiguous_extent(da, nbytes, &oa) && contiguous_extent(db, nbytes, &ob)) {
    if (oa == ob && oa + (int64_t)nbytes <= p->k.equal_prefix) return RC_OK;
    const rc_cmp_map *ma = p->k.ma, *mb = p->k.mb;
    if (ma && mb && ma->data && mb->data && (uint64_t)oa + nbytes <= ma->size &&
        (uint64_t)ob + nbytes <= mb->size) {
      const unsigned char *xa = ma->data + oa, *xb = mb->data + ob;
      const size_t per = BLOCK_BYTES / f.size; /* elements per memcmp */
      for (size_t i = 0; i < (size_t)s->npoints; i += per) {
        size_t n = (size_t)s->npoints - i < per ? (size_t)s->npoints - i : per;
        if (memcmp(xa + i * f.size, xb + i * f.size, n * f.size))
          rc_cmp_scan(&st, &f, xa + i * f.size, xb + i * f.size, n, (int64_t)i);
      }
      if (st.n_different) record_values_diff(p, path, dtname, s, &f, &st);
      return RC_OK;
    }
  }
  blocking bl = blocking_of(s, f.size);
  size_t cap = (size_t)(bl.rows_per_block * bl.row_elems) * f.size;
  unsigned char *ba = malloc(cap ? cap : 1), *bb = malloc(cap ? cap : 1);
  int rc = RC_OK;
  if (!ba || !bb) {
    rc = rc_fail(p->err, RC_EXIT_SOFTWARE, "out of memory (%zu bytes) comparing %s", 2 * cap, path);
    goto done;
  }
  for (hsize_t r0 = 0; r0 < bl.rows; r0 += bl.rows_per_block) {
    hsize_t nr = bl.rows - r0 < bl.rows_per_block ? bl.rows - r0 : bl.rows_per_block;
    if (read_rows(da, ftype, s, r0, nr, ba) < 0 || read_rows(db, ftype, s, r0, nr, bb) < 0) {
      rc = h5fail(p, "read", path);
      goto done;
    }
    size_t n = (size_t)(nr * bl.row_elems);
    if (memcmp(ba, bb, n * f.size)) rc_cmp_scan(&st, &f, ba, bb, n, (int64_t)(r0 * bl.row_elems));
  }
  if (st.n_different) record_values_diff(p, path, dtname, s, &f, &st);
done:
  free(ba);
  free(bb);
  return rc;
}

/* Different dtypes, same shape, both numeric: are the values equal once both
 * are converted to float64? Says whether a dtype change also changed data. */
static int converted_note(pair_t *p, const char *path, hid_t da, hid_t db, const shape_t *s,
                          char *out, size_t cap) {
  blocking bl = blocking_of(s, sizeof(double));
  size_t n = (size_t)(bl.rows_per_block * bl.row_elems);
  double *xa = malloc(n ? n * sizeof *xa : 1), *xb = malloc(n ? n * sizeof *xb : 1);
  int rc = RC_OK;
  int64_t ndiff = 0;
  if (!xa || !xb) {
    rc = rc_fail(p->err, RC_EXIT_SOFTWARE, "out of memory comparing %s", path);
    goto done;
  }
  for (hsize_t r0 = 0; s->npoints && r0 < bl.rows; r0 += bl.rows_per_block) {
    hsize_t nr = bl.rows - r0 < bl.rows_per_block ? bl.rows - r0 : bl.rows_per_block;
    if (read_rows(da, H5T_NATIVE_DOUBLE, s, r0, nr, xa) < 0 ||
        read_rows(db, H5T_NATIVE_DOUBLE, s, r0, nr, xb) < 0) {
      rc = h5fail(p, "read", path);
      goto done;
    }
    for (size_t i = 0; i < (size_t)(nr * bl.row_elems); i++)
      ndiff += memcmp(&xa[i], &xb[i], sizeof(double)) != 0;
  }
  if (ndiff)
    snprintf(out, cap, "; %" PRId64 " of %" PRId64 " values also differ as float64", ndiff,
             s->npoints);
  else
    snprintf(out, cap, "; values equal as float64");
done:
  free(xa);
  free(xb);
  return rc;
}

static bool is_number_class(hid_t t) {
  H5T_class_t c = H5Tget_class(t);
  return c == H5T_INTEGER || c == H5T_FLOAT;
}

static const char *manifest_hash(const rc_cmp_hashes *h, const char *path) {
  if (!h) return NULL;
  int lo = 0, hi = h->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(h->items[mid].path, path);
    if (!c) return h->items[mid].sha256;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return NULL;
}

static int compare_dataset(pair_t *p, const char *path) {
  int rc = RC_OK;
  hid_t da = -1, db = -1, ta = -1, tb = -1, sa = -1, sb = -1;
  if ((da = H5Dopen2(p->fa, path, H5P_DEFAULT)) < 0 ||
      (db = H5Dopen2(p->fb, path, H5P_DEFAULT)) < 0) {
    rc = h5fail(p, "open dataset", path);
    goto done;
  }
  if ((ta = H5Dget_type(da)) < 0 || (tb = H5Dget_type(db)) < 0 || (sa = H5Dget_space(da)) < 0 ||
      (sb = H5Dget_space(db)) < 0) {
    rc = h5fail(p, "read the type and shape of", path);
    goto done;
  }
  shape_t shape_a, shape_b;
  if (shape_of(sa, &shape_a) || shape_of(sb, &shape_b)) {
    rc = h5fail(p, "read the shape of", path);
    goto done;
  }
  char dta[64], dtb[64], sha[256], shb[256];
  rc_h5_type_name(ta, dta, sizeof dta);
  rc_h5_type_name(tb, dtb, sizeof dtb);
  shape_name(&shape_a, sha, sizeof sha);
  shape_name(&shape_b, shb, sizeof shb);
  htri_t same_type = H5Tequal(ta, tb);
  if (same_type < 0) {
    rc = h5fail(p, "compare the types of", path);
    goto done;
  }
  if (!same_type) {
    char note[160] = "";
    if (!strcmp(dta, dtb)) snprintf(note, sizeof note, " (type details differ)");
    if (shape_equal(&shape_a, &shape_b) && is_number_class(ta) && is_number_class(tb)) {
      rc = converted_note(p, path, da, db, &shape_a, note + strlen(note),
                          sizeof note - strlen(note));
      if (rc) goto done;
    }
    rc_cmp_add(p->c, RC_DIFF_DTYPE, p->file, path, "%s%s vs %s%s%s", dta, sha, dtb, shb, note);
  } else if (!shape_equal(&shape_a, &shape_b)) {
    rc_cmp_add(p->c, RC_DIFF_SHAPE, p->file, path, "%s%s vs %s%s", dta, sha, dtb, shb);
  } else {
    p->c->res->n_datasets_compared++;
    const char *ma = manifest_hash(p->k.ha, path), *mb = manifest_hash(p->k.hb, path);
    bool settled = ma && mb && !strcmp(ma, mb);
    if (!settled) rc = compare_values(p, path, da, db, ta, sa, &shape_a, dta);
  }
done:
  if (sa >= 0) H5Sclose(sa);
  if (sb >= 0) H5Sclose(sb);
  if (ta >= 0) H5Tclose(ta);
  if (tb >= 0) H5Tclose(tb);
  if (da >= 0) H5Dclose(da);
  if (db >= 0) H5Dclose(db);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Attributes. */

typedef struct {
  char **names;
  int n, cap;
} name_list;

static herr_t collect_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
  (void)loc;
  (void)info;
  name_list *l = data;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    char **v = realloc(l->names, sizeof *v * (size_t)cap);
    if (!v) return -1;
    l->names = v;
    l->cap = cap;
  }
  l->names[l->n++] = xstrdup(name);
  return 0;
}

static void name_list_free(name_list *l) {
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "...context..." around the first differing character of two strings. */
static void string_excerpts(const char *x, const char *y, char *ox, char *oy, size_t cap) {
  size_t k = 0;
  while (x[k] && x[k] == y[k]) k++;
  size_t from = k > 24 ? k - 24 : 0;
  snprintf(ox, cap, "\"%s%.48s%s\"", from ? "..." : "", x + from,
           strlen(x + from) > 48 ? "..." : "");
  snprintf(oy, cap, "\"%s%.48s%s\"", from ? "..." : "", y + from,
           strlen(y + from) > 48 ? "..." : "");
}

static int compare_attribute_values(pair_t *p, const char *objname, hid_t aa, hid_t ab, hid_t type,
                                    hid_t space, int64_t npoints) {
  int rc = RC_OK;
  if (npoints == 0) return RC_OK;
  if (H5Tis_variable_str(type) > 0) {
    hid_t mt = H5Tcopy(H5T_C_S1);
    char **va = calloc((size_t)npoints, sizeof *va), **vb = calloc((size_t)npoints, sizeof *vb);
    bool ra = false, rb = false;
    if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(type)) < 0 ||
        !va || !vb) {
      rc = h5fail(p, "make a string type for", objname);
    } else {
      ra = H5Aread(aa, mt, va) >= 0;
      rb = ra && H5Aread(ab, mt, vb) >= 0;
      if (!ra || !rb) rc = h5fail(p, "read attribute", objname);
    }
    for (int64_t i = 0; !rc && i < npoints; i++) {
      const char *x = va[i] ? va[i] : "", *y = vb[i] ? vb[i] : "";
      if (!strcmp(x, y)) continue;
      char ex[160], ey[160];
      string_excerpts(x, y, ex, ey, sizeof ex);
      rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "value%s: %s vs %s",
                 npoints > 1 ? " (first differing element)" : "", ex, ey);
      break;
    }
    if (ra) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, va);
    if (rb) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, vb);
    free(va);
    free(vb);
    if (mt >= 0) H5Tclose(mt);
    return rc;
  }
  if (H5Tdetect_class(type, H5T_VLEN) > 0) {
    rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname,
               "value not compared (variable-length type other than string)");
    return RC_OK;
  }
  rc_cmp_el_fmt f = el_fmt_of(type);
  size_t n = (size_t)npoints * f.size;
  unsigned char *ba = malloc(n ? n : 1), *bb = malloc(n ? n : 1);
  if (!ba || !bb) {
    rc = rc_fail(p->err, RC_EXIT_SOFTWARE, "out of memory");
  } else if (H5Aread(aa, type, ba) < 0 || H5Aread(ab, type, bb) < 0) {
    rc = h5fail(p, "read attribute", objname);
  } else if (memcmp(ba, bb, n)) {
    size_t i = 0;
    while (!memcmp(ba + i * f.size, bb + i * f.size, f.size)) i++;
    char va[96], vb[96];
    if (f.kind == RC_EL_STR) {
      char x[512], y[512];
      snprintf(x, sizeof x, "%.*s", (int)strnlen((char *)ba + i * f.size, f.size),
               (char *)ba + i * f.size);
      snprintf(y, sizeof y, "%.*s", (int)strnlen((char *)bb + i * f.size, f.size),
               (char *)bb + i * f.size);
      string_excerpts(x, y, va, vb, sizeof va);
    } else {
      el_format(&f, ba + i * f.size, va, sizeof va);
      el_format(&f, bb + i * f.size, vb, sizeof vb);
    }
    if (npoints > 1)
      rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "value[%zu]: %s vs %s", i, va, vb);
    else
      rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "value: %s vs %s", va, vb);
  }
  free(ba);
  free(bb);
  return rc;
}

static int compare_attribute(pair_t *p, const char *objname, hid_t oa, hid_t ob, const char *name) {
  int rc = RC_OK;
  hid_t aa = -1, ab = -1, ta = -1, tb = -1, sa = -1, sb = -1;
  if ((aa = H5Aopen(oa, name, H5P_DEFAULT)) < 0 || (ab = H5Aopen(ob, name, H5P_DEFAULT)) < 0 ||
      (ta = H5Aget_type(aa)) < 0 || (tb = H5Aget_type(ab)) < 0 || (sa = H5Aget_space(aa)) < 0 ||
      (sb = H5Aget_space(ab)) < 0) {
    rc = h5fail(p, "open attribute", objname);
    goto done;
  }
  shape_t shape_a, shape_b;
  if (shape_of(sa, &shape_a) || shape_of(sb, &shape_b)) {
    rc = h5fail(p, "read the shape of attribute", objname);
    goto done;
  }
  char dta[64], dtb[64], sha[256], shb[256];
  rc_h5_type_name(ta, dta, sizeof dta);
  rc_h5_type_name(tb, dtb, sizeof dtb);
  shape_name(&shape_a, sha, sizeof sha);
  shape_name(&shape_b, shb, sizeof shb);
  htri_t same = H5Tequal(ta, tb);
  if (same < 0) {
    rc = h5fail(p, "compare the types of attribute", objname);
  } else if (!same) {
    rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "type %s%s vs %s%s%s", dta, sha, dtb, shb,
               strcmp(dta, dtb) ? "" : " (type details differ)");
  } else if (!shape_equal(&shape_a, &shape_b)) {
    rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "shape %s%s vs %s%s", dta, sha, dtb, shb);
  } else {
    rc = compare_attribute_values(p, objname, aa, ab, ta, sa, shape_a.npoints);
  }
done:
  if (sa >= 0) H5Sclose(sa);
  if (sb >= 0) H5Sclose(sb);
  if (ta >= 0) H5Tclose(ta);
  if (tb >= 0) H5Tclose(tb);
  if (aa >= 0) H5Aclose(aa);
  if (ab >= 0) H5Aclose(ab);
  return rc;
}

static void attr_objname(char *out, size_t cap, const char *path, const char *name) {
  snprintf(out, cap, "%s@%s", path, name);
}

static int compare_attributes(pair_t *p, const char *path) {
  int rc = RC_OK;
  hid_t oa = -1, ob = -1;
  name_list la = {0}, lb = {0};
  if ((oa = H5Oopen(p->fa, path, H5P_DEFAULT)) < 0 ||
      (ob = H5Oopen(p->fb, path, H5P_DEFAULT)) < 0) {
    rc = h5fail(p, "open object", path);
    goto done;
  }
  if (H5Aiterate2(oa, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_attr, &la) < 0 ||
      H5Aiterate2(ob, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_attr, &lb) < 0) {
    rc = h5fail(p, "list the attributes of", path);
    goto done;
  }
  if (la.n > 1) qsort(la.names, (size_t)la.n, sizeof *la.names, str_cmp);
  if (lb.n > 1) qsort(lb.names, (size_t)lb.n, sizeof *lb.names, str_cmp);
  int i = 0, k = 0;
  while (!rc && (i < la.n || k < lb.n)) {
    int c = i == la.n ? 1 : k == lb.n ? -1 : strcmp(la.names[i], lb.names[k]);
    const char *name = c <= 0 ? la.names[i] : lb.names[k];
    char objname[1024];
    attr_objname(objname, sizeof objname, path, name);
    if (rc_cmp_ignored(p->c, p->file, objname)) {
      p->c->n_ignored++;
    } else if (c < 0) {
      rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "attribute only in A");
    } else if (c > 0) {
      rc_cmp_add(p->c, RC_DIFF_ATTRIBUTE, p->file, objname, "attribute only in B");
    } else {
      rc = compare_attribute(p, objname, oa, ob, name);
    }
    if (c <= 0) i++;
    if (c >= 0) k++;
  }
done:
  name_list_free(&la);
  name_list_free(&lb);
  if (oa >= 0) H5Oclose(oa);
  if (ob >= 0) H5Oclose(ob);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Objects in both files. */

static int compare_named_types(pair_t *p, const char *path) {
  hid_t ta = H5Topen2(p->fa, path, H5P_DEFAULT), tb = H5Topen2(p->fb, path, H5P_DEFAULT);
  int rc = RC_OK;
  htri_t eq = ta >= 0 && tb >= 0 ? H5Tequal(ta, tb) : -1;
  if (eq < 0) {
    rc = h5fail(p, "open named datatype", path);
  } else if (!eq) {
    char na[64], nb[64];
    rc_h5_type_name(ta, na, sizeof na);
    rc_h5_type_name(tb, nb, sizeof nb);
    rc_cmp_add(p->c, RC_DIFF_DTYPE, p->file, path, "named datatype %s vs %s%s", na, nb,
               strcmp(na, nb) ? "" : " (type details differ)");
  }
  if (ta >= 0) H5Tclose(ta);
  if (tb >= 0) H5Tclose(tb);
  return rc;
}

static int compare_common(pair_t *p, const obj_entry *a, const obj_entry *b) {
  if (a->kind != b->kind) {
    rc_cmp_add(p->c, RC_DIFF_DTYPE, p->file, a->path, "object kind: %s vs %s",
               obj_kind_name(a->kind), obj_kind_name(b->kind));
    return RC_OK;
  }
  int rc = RC_OK;
  switch (a->kind) {
  case OBJ_SOFT:
  case OBJ_EXTERNAL:
    if (strcmp(a->target, b->target))
      rc_cmp_add(p->c, RC_DIFF_VALUES, p->file, a->path, "%s target: %s vs %s",
                 obj_kind_name(a->kind), a->target, b->target);
    return RC_OK;
  case OBJ_DATASET:
    rc = compare_dataset(p, a->path);
    break;
  case OBJ_DATATYPE:
    rc = compare_named_types(p, a->path);
    break;
  default:
    break;
  }
  if (!rc) rc = compare_attributes(p, a->path);
  return rc;
}

/* Reports l->v[*i] as missing on the other side; a missing group stands for
 * everything below it, which is counted rather than listed. */
static void report_missing(pair_t *p, const obj_list *l, int *i, rc_diff_kind kind) {
  const obj_entry *e = &l->v[*i];
  size_t len = strlen(e->path);
  int below = 0;
  if (e->kind == OBJ_GROUP)
    while (*i + 1 + below < l->n && !strncmp(l->v[*i + 1 + below].path, e->path, len) &&
           l->v[*i + 1 + below].path[len] == '/')
      below++;
  const char *side = kind == RC_DIFF_MISSING_IN_B ? "A" : "B";
  if (below)
    rc_cmp_add(p->c, kind, p->file, e->path, "%s only in %s (with %d objects below it)",
               obj_kind_name(e->kind), side, below);
  else
    rc_cmp_add(p->c, kind, p->file, e->path, "%s only in %s", obj_kind_name(e->kind), side);
  *i += below;
}

bool rc_cmp_is_hdf5(const char *path) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  int fd;
  size_t size;
  rc_err e = {0};
  if (rc_open_regular(path, false, &fd, &size, &e)) return false; /* never a FIFO or device */
  bool found = false;
  for (long off = 0; !found && off <= (1L << 30); off = off ? 2 * off : 512) {
    unsigned char buf[8];
    if (pread(fd, buf, 8, off) != 8) break;
    found = !memcmp(buf, sig, 8);
  }
  close(fd);
  return found;
}

/* Step 1 of h5_bounds.h on the mapped file (mapped here when the caller
 * has no map); *size: the file's size, for step 2. */
static int precheck(const char *path, const rc_cmp_map *known, const char *label, int64_t *size,
                    rc_err *err) {
  rc_cmp_map own = {0};
  const rc_cmp_map *m = known;
  if (!m || !m->data) {
    int rc = rc_cmp_map_open(path, &own, err);
    if (rc) return rc;
    m = &own;
  }
  *size = (int64_t)m->size;
  int rc = rc_h5_precheck_bytes(m->data, m->size, label, err);
  rc_cmp_map_close(&own);
  return rc;
}

static int cmp_hdf5(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                    const rc_cmp_known *known, rc_err *err);

/* Whether the file (mapped by the caller, or here) is one of our own shards
 * by its structure (io/checkpoint.h): libhdf5 parses those safely. */
static bool own_structure(const char *path, const rc_cmp_map *known) {
  if (known && known->data) return rc_shard_structure_is_ours(known->data, known->size);
  rc_cmp_map m;
  rc_err err = {0};
  if (rc_cmp_map_open(path, &m, &err)) return false;
  bool ours = rc_shard_structure_is_ours(m.data, m.size);
  rc_cmp_map_close(&m);
  return ours;
}

/* libhdf5 1.10 can still crash on a crafted file that passes the bounds of
 * h5_bounds.h (a segfault in H5A__close while the file is closed, found by
 * fuzz_compare). A pair that is not two of our own shards is therefore
 * compared first in a child process, whose results are thrown away: a
 * child killed by a signal means the files cannot be read safely, and this
 * process never parses them (65). The comparison is deterministic, so a
 * pair the child survives is compared again here. */
static int probe_in_child(rc_cmp_ctx *c, const char *file_rel, const char *path_a,
                          const char *path_b, const rc_cmp_known *known, rc_err *err) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return RC_OK; /* no probe: compared here, as before */
  if (pid == 0) {
    rc_err child_err = {0};
    cmp_hdf5(c, file_rel, path_a, path_b, known, &child_err);
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return RC_OK;
  /* the child ends with _exit(0) however its comparison came out: anything
   * else is a crash (a signal, or a sanitizer's exit) */
  char how[32];
  if (WIFSIGNALED(status))
    snprintf(how, sizeof how, "signal %d", WTERMSIG(status));
  else
    snprintf(how, sizeof how, "exit %d", WEXITSTATUS(status));
  return rc_fail(err, RC_EXIT_DATAERR,
                 "%s / %s: libhdf5 crashed (%s) reading these files: a malformed HDF5 file; "
                 "not compared",
                 path_a, path_b, how);
}

int rc_cmp_hdf5(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                const rc_cmp_known *known, rc_err *err) {
  bool ours = own_structure(path_a, known ? known->ma : NULL) &&
              own_structure(path_b, known ? known->mb : NULL);
  if (!ours && getenv("RC_TEST_COMPARE_UNISOLATED") == NULL) {
    int rc = probe_in_child(c, file_rel, path_a, path_b, known, err);
    if (rc) return rc;
  }
  return cmp_hdf5(c, file_rel, path_a, path_b, known, err);
}

static int cmp_hdf5(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                    const rc_cmp_known *known, rc_err *err) {
  /* libhdf5 prints its error stack by default; our messages say what failed. */
  H5E_auto2_t old_func;
  void *old_data;
  H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

  pair_t p = {c, file_rel, path_a, path_b, -1, -1, {0}, err};
  if (known) p.k = *known;
  obj_list la = {0}, lb = {0};
  int rc = RC_OK;
  /* Foreign files are bounded before libhdf5 reads them (h5_bounds.h):
   * the superblock from the raw bytes, then each dataset's claims. */
  char label_a[4200], label_b[4200];
  snprintf(label_a, sizeof label_a, "%s (A)", path_a);
  snprintf(label_b, sizeof label_b, "%s (B)", path_b);
  int64_t size_a = 0, size_b = 0;
  if ((rc = precheck(path_a, p.k.ma, label_a, &size_a, err)) ||
      (rc = precheck(path_b, p.k.mb, label_b, &size_b, err)))
    goto done;
  if ((p.fa = H5Fopen(path_a, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: cannot open as HDF5 (corrupt or truncated)", label_a);
    goto done;
  }
  if ((p.fb = H5Fopen(path_b, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: cannot open as HDF5 (corrupt or truncated)", label_b);
    goto done;
  }
  if ((rc = rc_h5_check_datasets(p.fa, size_a, label_a, err)) ||
      (rc = rc_h5_check_datasets(p.fb, size_b, label_b, err)))
    goto done;
  if (list_objects(p.fa, &la) || list_objects(p.fb, &lb)) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s / %s: cannot list the objects (corrupt HDF5)", path_a,
                 path_b);
    goto done;
  }
  int i = 0, k = 0;
  while (!rc && (i < la.n || k < lb.n)) {
    int cmp = i == la.n ? 1 : k == lb.n ? -1 : path_cmp(la.v[i].path, lb.v[k].path);
    const char *path = cmp <= 0 ? la.v[i].path : lb.v[k].path;
    if (rc_cmp_ignored(c, file_rel, path)) {
      c->n_ignored++;
    } else if (cmp < 0) {
      report_missing(&p, &la, &i, RC_DIFF_MISSING_IN_B);
    } else if (cmp > 0) {
      report_missing(&p, &lb, &k, RC_DIFF_MISSING_IN_A);
    } else {
      rc = compare_common(&p, &la.v[i], &lb.v[k]);
    }
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
  }
done:
  obj_list_free(&la);
  obj_list_free(&lb);
  if (p.fa >= 0) H5Fclose(p.fa);
  if (p.fb >= 0) H5Fclose(p.fb);
  H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
  return rc;
}
