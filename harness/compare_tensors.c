/* compare_tensors.c — .npy, .npz and safetensors files compared tensor by
 * tensor, with the numbers the HDF5 slow path gives a dataset.
 *
 * Other trainers keep their state in these formats; as bytes, a difference
 * in one of them says only "first difference at byte N". Here each file is
 * read as a list of named tensors (dtype, shape, where the data are), the
 * lists are matched by name, and a pair of the same dtype and shape goes
 * through rc_cmp_scan (compare_datasets.c): elements that differ, the
 * first index, max |a-b|, max rel, ULP, NaN and signed-zero cases.
 *
 *   .npy          magic "\x93NUMPY", version 1.x (u16 header length), 2.x
 *                 or 3.x (u32), then a Python dict literal with 'descr',
 *                 'fortran_order' and 'shape'; the data follow.
 *   .npz          a zip of .npy members (tensor "x" is member "x.npy"),
 *                 stored or deflated (zlib, inflated in blocks), zip64
 *                 sizes and offsets read.
 *   .safetensors  u64 little-endian header length, a JSON object
 *                 {name: {dtype, shape, data_offsets: [begin, end)}} with
 *                 an optional __metadata__, then the data.
 *
 * Every header is untrusted: lengths, offsets and sizes are checked against
 * the file before anything is read through them (no allocation follows a
 * declared size), and a header that is truncated, does not parse, points
 * outside the file or makes two tensors overlap is RC_EXIT_DATAERR naming
 * the file and the problem. A dtype this tool does not decode (object or
 * structured arrays) is not an error: the caller compares such files as
 * bytes and says why. Stored data are compared in place in the mapped
 * files; deflated members are inflated block by block, both sides at once,
 * so memory stays bounded whatever the size. */
#include "harness/compare_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/json.h"

#define T_MAX_DIM 64               /* numpy's limit */
#define T_BLOCK ((size_t)4 << 20)  /* bytes per side per comparison block */
#define NPY_MAX_HEADER (1u << 20)  /* numpy itself stops at 10000 bytes */
#define ST_MAX_HEADER (100u << 20) /* the safetensors format's own limit */

typedef struct {
  char name[512];
  char dtname[32]; /* "float32", "bfloat16", "int8", "bool", "float32be" */
  rc_cmp_el_fmt f;
  int ndim;
  int64_t dims[T_MAX_DIM];
  int64_t n; /* elements */
  bool fortran;
  int64_t nbytes;   /* n * f.size */
  int64_t data_off; /* stored: where the bytes are in the file */
  bool deflated;    /* npz member: a raw deflate stream ... */
  int64_t z_off, z_size;
  int64_t skip; /* ... whose first skip bytes are the .npy header */
} tensor_t;

typedef struct {
  tensor_t *v;
  int n, cap;
  bool unsupported; /* a dtype this tool does not decode: compare as bytes */
  char why[256];
} tensor_list;

typedef enum { TF_NPY, TF_NPZ, TF_SAFETENSORS } tensor_format;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

bool rc_cmp_is_tensor_name(const char *name) {
  return ends_with(name, ".npy") || ends_with(name, ".npz") || ends_with(name, ".safetensors");
}

static tensor_t *list_push(tensor_list *l, rc_err *err) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    tensor_t *v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) {
      rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
      return NULL;
    }
    l->v = v;
    l->cap = cap;
  }
  tensor_t *t = &l->v[l->n++];
  memset(t, 0, sizeof *t);
  return t;
}

static uint16_t le16(const unsigned char *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* n = prod(dims), nbytes = n * size, both without overflow. */
static bool count_elements(tensor_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->dims[i] < 0) return false;
    if (t->dims[i] && n > INT64_MAX / t->dims[i]) return false;
    n *= t->dims[i];
  }
  if (t->f.size && n > INT64_MAX / (int64_t)t->f.size) return false;
  t->n = n;
  t->nbytes = n * (int64_t)t->f.size;
  return true;
}

/* ---------------------------------------------------------------------------
 * .npy headers: a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * Only this restricted grammar is read (strings, True/False, tuples of
 * non-negative integers); anything else in it is malformed. */

typedef struct {
  const char *p, *end;
} lit_t;

static void lit_ws(lit_t *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}

static bool lit_char(lit_t *l, char c) {
  lit_ws(l);
  if (l->p < l->end && *l->p == c) {
    l->p++;
    return true;
  }
  return false;
}

static bool lit_str(lit_t *l, char *out, size_t cap) {
  lit_ws(l);
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return false;
  char q = *l->p++;
  size_t n = 0;
  while (l->p < l->end && *l->p != q) {
    if (*l->p == '\\' || n + 1 >= cap) return false;
    out[n++] = *l->p++;
  }
  if (l->p >= l->end) return false;
  l->p++;
  out[n] = 0;
  return true;
}

static bool lit_word(lit_t *l, const char *w) {
  lit_ws(l);
  size_t n = strlen(w);
  if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n)) return false;
  l->p += n;
  return true;
}

static bool lit_shape(lit_t *l, tensor_t *t) {
  if (!lit_char(l, '(')) return false;
  t->ndim = 0;
  for (;;) {
    if (lit_char(l, ')')) return true;
    lit_ws(l);
    if (l->p >= l->end || *l->p < '0' || *l->p > '9' || t->ndim == T_MAX_DIM) return false;
    int64_t v = 0;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = 10 * v + (*l->p++ - '0');
    }
    if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2 longs */
    t->dims[t->ndim++] = v;
    if (lit_char(l, ',')) continue;
    return lit_char(l, ')');
  }
}

/* A numpy descr ("<f4", "|b1", ">i8", "<U5") to an element format and a
 * name. false: not a dtype this tool decodes (object, structured). */
static bool npy_descr(const char *d, tensor_t *t) {
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return false;
  char kind = d[1];
  char *endp;
  long size = strtol(d + 2, &endp, 10);
  if (!kind || endp == d + 2 || *endp || size <= 0 || size > 1 << 20) return false;
  bool be = order == '>' || (order == '=' && !rc_cmp_host_is_le());
  t->f.swap = size > 1 && be == rc_cmp_host_is_le();
  t->f.size = (size_t)size;
  const char *suffix = be && size > 1 ? "be" : "";
  switch (kind) {
  case 'f':
    if (size != 2 && size != 4 && size != 8) break;
    t->f.kind = size == 2 ? RC_EL_F16 : size == 4 ? RC_EL_F32 : RC_EL_F64;
    snprintf(t->dtname, sizeof t->dtname, "float%ld%s", 8 * size, suffix);
    return true;
  case 'i':
  case 'u':
    if (size != 1 && size != 2 && size != 4 && size != 8) break;
    t->f.kind = kind == 'i' ? RC_EL_INT : RC_EL_UINT;
    snprintf(t->dtname, sizeof t->dtname, "%sint%ld%s", kind == 'i' ? "" : "u", 8 * size, suffix);
    return true;
  case 'b':
    if (size != 1) break;
    t->f.kind = RC_EL_UINT;
    snprintf(t->dtname, sizeof t->dtname, "bool");
    return true;
  default:
    break;
  }
  /* complex, byte strings, unicode, void, dates: compared element by
   * element as stored bytes */
  if (kind == 'c' || kind == 'S' || kind == 'V' || kind == 'U' || kind == 'M' || kind == 'm' ||
      kind == 'f') {
    if (kind == 'U') {
      if (size > (1 << 20) / 4) return false;
      t->f.size = (size_t)size * 4;
    }
    t->f.kind = RC_EL_RAW;
    t->f.swap = false;
    snprintf(t->dtname, sizeof t->dtname, "%s", d);
    return true;
  }
  return false;
}

/* Parses a .npy header at p[0..avail) (avail: what is there, at least the
 * whole header when the file is whole). Fills t's dtype and shape and
 * *hdr (bytes before the data). Returns NULL when well-formed, else the
 * problem; *unsupported when the header is fine but its dtype is not
 * decoded. */
static const char *npy_header(const unsigned char *p, size_t avail, tensor_t *t, int64_t *hdr,
                              bool *unsupported, char *why, size_t why_cap) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (avail < 10) return "truncated (shorter than the 10-byte .npy preamble)";
  if (memcmp(p, magic, 6)) return "no .npy magic (\\x93NUMPY)";
  int major = p[6];
  if (major < 1 || major > 3) return "unknown .npy format version (not 1, 2 or 3)";
  size_t pre = major == 1 ? 10 : 12;
  if (avail < pre) return "truncated inside the .npy preamble";
  uint64_t hlen = major == 1 ? le16(p + 8) : le32(p + 8);
  if (hlen > NPY_MAX_HEADER) return "header length over 1 MiB (not read)";
  if (pre + hlen > avail) return "truncated: the header length runs past the end of the file";
  *hdr = (int64_t)(pre + hlen);
  lit_t l = {(const char *)p + pre, (const char *)p + pre + hlen};
  char key[64], descr[64] = "";
  bool have_descr = false, have_fortran = false, have_shape = false;
  if (!lit_char(&l, '{')) return "header is not a dict literal";
  for (;;) {
    if (lit_char(&l, '}')) break;
    if (!lit_str(&l, key, sizeof key) || !lit_char(&l, ':')) return "malformed header dict";
    if (!strcmp(key, "descr")) {
      lit_ws(&l);
      if (l.p < l.end && (*l.p == '[' || *l.p == '{')) { /* structured: not decoded */
        *unsupported = true;
        snprintf(why, why_cap, "structured dtype: not decoded");
        return NULL;
      }
      if (!lit_str(&l, descr, sizeof descr)) return "malformed 'descr'";
      have_descr = true;
    } else if (!strcmp(key, "fortran_order")) {
      if (lit_word(&l, "True"))
        t->fortran = true;
      else if (lit_word(&l, "False"))
        t->fortran = false;
      else
        return "malformed 'fortran_order' (not True or False)";
      have_fortran = true;
    } else if (!strcmp(key, "shape")) {
      if (!lit_shape(&l, t)) return "malformed 'shape' (not a tuple of integers)";
      have_shape = true;
    } else {
      return "unknown key in the header dict";
    }
    if (lit_char(&l, ',')) continue;
    if (lit_char(&l, '}')) break;
    return "malformed header dict";
  }
  lit_ws(&l);
  if (l.p != l.end) return "bytes after the header dict";
  if (!have_descr || !have_fortran || !have_shape)
    return "header lacks 'descr', 'fortran_order' or 'shape'";
  if (!npy_descr(descr, t)) {
    *unsupported = true;
    snprintf(why, why_cap, "dtype '%s': not decoded", descr);
    return NULL;
  }
  if (!count_elements(t)) return "shape too large (elements or bytes overflow)";
  return NULL;
}

static int bad(rc_err *err, const char *path, const char *side, const char *what,
               const char *problem) {
  return rc_fail(err, RC_EXIT_DATAERR, "%s: malformed %s: %s (side %s)", path, what, problem, side);
}

static int read_npy(const char *path, const char *side, const char *tname, const rc_cmp_map *m,
                    tensor_list *l, rc_err *err) {
  tensor_t *t = list_push(l, err);
  if (!t) return RC_EXIT_SOFTWARE;
  int64_t hdr = 0;
  const char *p = npy_header(m->data, m->size, t, &hdr, &l->unsupported, l->why, sizeof l->why);
  if (p) return bad(err, path, side, ".npy file", p);
  if (l->unsupported) return RC_OK;
  snprintf(t->name, sizeof t->name, "%s", tname);
  t->data_off = hdr;
  int64_t have = (int64_t)m->size - hdr;
  if (have != t->nbytes) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "%s: the header declares %" PRId64 " bytes of data (%s, %" PRId64
             " elements), the file holds %" PRId64,
             have < t->nbytes ? "truncated" : "bytes after the data", t->nbytes, t->dtname, t->n,
             have);
    return bad(err, path, side, ".npy file", msg);
  }
  return RC_OK;
}

/* ---------------------------------------------------------------------------
 * Inflating an npz member in blocks. */

typedef struct {
  z_stream z;
  bool init;
  const unsigned char *in;
  int64_t in_left;
} inflater;

static bool inflater_open(inflater *s, const unsigned char *in, int64_t n) {
  memset(s, 0, sizeof *s);
  if (inflateInit2(&s->z, -MAX_WBITS) != Z_OK) return false;
  s->init = true;
  s->in = in;
  s->in_left = n;
  return true;
}

static void inflater_close(inflater *s) {
  if (s->init) inflateEnd(&s->z);
  s->init = false;
}

/* Exactly n bytes into out; NULL on success, else the problem (a corrupt
 * stream, or one that ends early). */
static const char *inflater_read(inflater *s, unsigned char *out, size_t n) {
  s->z.next_out = out;
  s->z.avail_out = (uInt)n; /* n <= T_BLOCK */
  while (s->z.avail_out) {
    if (!s->z.avail_in && s->in_left) {
      uInt k = s->in_left > (1 << 30) ? 1u << 30 : (uInt)s->in_left;
      s->z.next_in = (unsigned char *)s->in;
      s->z.avail_in = k;
      s->in += k;
      s->in_left -= k;
    }
    int zr = inflate(&s->z, Z_NO_FLUSH);
    if (zr == Z_STREAM_END && s->z.avail_out) return "deflated data end early (truncated)";
    if (zr == Z_STREAM_END) break;
    if (zr == Z_BUF_ERROR) { /* no progress: only when the input has run out */
      if (s->z.avail_in || !s->in_left) return "deflated data end early (truncated)";
      continue;
    }
    if (zr != Z_OK) return s->z.msg ? s->z.msg : "corrupt deflate stream";
  }
  return NULL;
}

/* ---------------------------------------------------------------------------
 * .npz: the zip's central directory, each member's .npy header. */

static const char *zip_find_eocd(const rc_cmp_map *m, size_t *eocd) {
  if (m->size < 22) return "not a zip archive (shorter than an end-of-central-directory record)";
  size_t lo = m->size > 22 + 65535 ? m->size - 22 - 65535 : 0;
  for (size_t i = m->size - 22 + 1; i-- > lo;) {
    if (le32(m->data + i) == 0x06054b50 && i + 22 + le16(m->data + i + 20) <= m->size) {
      *eocd = i;
      return NULL;
    }
  }
  return "not a zip archive (no end-of-central-directory record)";
}

/* Where the central directory is and how many entries it has, from the
 * end record (the zip64 record where the classic fields are saturated). */
static int npz_directory(const char *path, const char *side, const rc_cmp_map *m,
                         uint64_t *n_entries, uint64_t *dir_off, uint64_t *dir_size, rc_err *err) {
  const char *what = ".npz archive";
  size_t eocd = 0;
  const char *p = zip_find_eocd(m, &eocd);
  if (p) return bad(err, path, side, what, p);
  const unsigned char *e = m->data + eocd;
  uint64_t entries = le16(e + 10), cd_size = le32(e + 12), cd_off = le32(e + 16);
  if (le16(e + 4) || le16(e + 6) || le16(e + 8) != le16(e + 10))
    return bad(err, path, side, what, "multi-disk archive");
  if (entries == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
    /* zip64: the locator right before the record, then the zip64 record */
    if (eocd < 20 || le32(e - 20) != 0x07064b50)
      return bad(err, path, side, what, "zip64 sizes without a zip64 locator");
    uint64_t z = le64(e - 20 + 8);
    if (z > eocd - 20 || eocd - 20 - z < 56 || le32(m->data + z) != 0x06064b50)
      return bad(err, path, side, what, "zip64 end-of-central-directory record outside the file");
    entries = le64(m->data + z + 32);
    cd_size = le64(m->data + z + 40);
    cd_off = le64(m->data + z + 48);
  }
  if (cd_off > eocd || cd_size > eocd - cd_off)
    return bad(err, path, side, what, "central directory outside the file");
  *n_entries = entries;
  *dir_off = cd_off;
  *dir_size = cd_size;
  return RC_OK;
}

/* One member as its central-directory entry describes it. */
typedef struct {
  unsigned flags, method;
  uint64_t csize, usize, loff; /* zip64 extra applied */
  size_t nlen;
  char member[512]; /* the name, NUL-terminated */
} zip_member;

/* The zip64 extra field's values for the fields that are 0xffffffff, in
 * their fixed order; other extra fields are skipped. */
static void zip64_extra(const unsigned char *x, const unsigned char *x_end, zip_member *z) {
  while (x_end - x >= 4) {
    unsigned id = le16(x), sz = le16(x + 2);
    if ((size_t)(x_end - x - 4) < sz) break;
    if (id == 1) {
      const unsigned char *q = x + 4, *qe = q + sz;
      if (z->usize == 0xffffffffu && qe - q >= 8) z->usize = le64(q), q += 8;
      if (z->csize == 0xffffffffu && qe - q >= 8) z->csize = le64(q), q += 8;
      if (z->loff == 0xffffffffu && qe - q >= 8) z->loff = le64(q), q += 8;
    }
    x += 4 + sz;
  }
}

/* The central-directory entry at *cdp into z; *cdp moves past it. */
static int npz_entry(const char *path, const char *side, const unsigned char **cdp,
                     const unsigned char *cd_end, zip_member *z, rc_err *err) {
  const char *what = ".npz archive";
  const unsigned char *cd = *cdp;
  if (cd_end - cd < 46 || le32(cd) != 0x02014b50)
    return bad(err, path, side, what, "central directory truncated or corrupt");
  z->flags = le16(cd + 8);
  z->method = le16(cd + 10);
  z->csize = le32(cd + 20);
  z->usize = le32(cd + 24);
  z->loff = le32(cd + 42);
  size_t nlen = le16(cd + 28), xlen = le16(cd + 30), clen = le16(cd + 32);
  if ((size_t)(cd_end - cd) < 46 + nlen + xlen + clen)
    return bad(err, path, side, what, "central directory entry runs past its end");
  zip64_extra(cd + 46 + nlen, cd + 46 + nlen + xlen, z);
  if (nlen >= sizeof z->member) return bad(err, path, side, what, "member name over 511 bytes");
  memcpy(z->member, cd + 46, nlen);
  z->member[nlen] = 0;
  z->nlen = nlen;
  *cdp = cd + 46 + nlen + xlen + clen;
  if (memchr(z->member, 0, nlen)) return bad(err, path, side, what, "NUL in a member name");
  return RC_OK;
}

/* A .npy member readable here: not encrypted, stored or deflated, its
 * local header and data inside the archive before the central directory
 * at cd_off; *data: where its (compressed) bytes start. */
static int npz_check_member(const char *path, const char *side, const rc_cmp_map *m,
                            uint64_t cd_off, const zip_member *z, uint64_t *data, rc_err *err) {
  const char *what = ".npz archive";
  char msg[600];
  if (z->flags & 1) {
    snprintf(msg, sizeof msg, "member '%s' is encrypted", z->member);
    return bad(err, path, side, what, msg);
  }
  if (z->method != 0 && z->method != 8) {
    snprintf(msg, sizeof msg, "member '%s': compression method %u (only stored and deflated)",
             z->member, z->method);
    return bad(err, path, side, what, msg);
  }
  if (z->loff > cd_off || cd_off - z->loff < 30 || le32(m->data + z->loff) != 0x04034b50) {
    snprintf(msg, sizeof msg, "member '%s': local header outside the file or corrupt", z->member);
    return bad(err, path, side, what, msg);
  }
  uint64_t d = z->loff + 30 + le16(m->data + z->loff + 26) + le16(m->data + z->loff + 28);
  if (d > cd_off || z->csize > cd_off - d || (z->method == 0 && z->csize != z->usize)) {
    snprintf(msg, sizeof msg,
             "member '%s': data outside the archive (offset %" PRIu64 ", %" PRIu64
             " bytes) or sizes inconsistent",
             z->member, d, z->csize);
    return bad(err, path, side, what, msg);
  }
  *data = d;
  return RC_OK;
}

/* A member's .npy header bytes at p[0, avail): in place when stored,
 * inflated into head when deflated, or into big (owned) when longer. */
typedef struct {
  unsigned char head[12 + 4096];
  unsigned char *big;
  const unsigned char *p;
  size_t avail;
} member_head;

/* Inflates the start of a deflated member: enough for the preamble, then
 * the whole header when it is longer than head. Non-zero only when out of
 * memory; a corrupt or short stream is *problem. */
static int inflate_head(const rc_cmp_map *m, uint64_t data, const zip_member *z, member_head *h,
                        const char **problem, rc_err *err) {
  inflater s;
  if (!inflater_open(&s, m->data + data, (int64_t)z->csize))
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  size_t want = z->usize < sizeof h->head ? (size_t)z->usize : sizeof h->head;
  const char *zp = inflater_read(&s, h->head, want);
  size_t pre = want >= 10 && h->head[6] == 1 ? 10 : 12;
  uint64_t hl = want >= 12 ? (h->head[6] == 1 ? le16(h->head + 8) : le32(h->head + 8)) : 0;
  if (!zp && hl <= NPY_MAX_HEADER && pre + hl > want && pre + hl <= z->usize) {
    h->big = malloc(pre + hl); /* bounded: at most 1 MiB + 12 */
    if (!h->big) {
      inflater_close(&s);
      return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    }
    memcpy(h->big, h->head, want);
    zp = inflater_read(&s, h->big + want, pre + hl - want);
    want = pre + hl;
  }
  inflater_close(&s);
  *problem = zp;
  h->p = h->big ? h->big : h->head;
  h->avail = want;
  return RC_OK;
}

/* The member's .npy header into t (dtype, shape), checked against the
 * member's size, and where its data lies in the archive. */
static int npz_member(const char *path, const char *side, const rc_cmp_map *m, const zip_member *z,
                      uint64_t data, tensor_t *t, tensor_list *l, rc_err *err) {
  const char *what = ".npz archive";
  char msg[600];
  member_head h;
  h.big = NULL;
  h.p = m->data + data;
  h.avail = (size_t)(z->usize < z->csize ? z->usize : z->csize);
  if (z->method == 8) {
    const char *zp = NULL;
    int rc = inflate_head(m, data, z, &h, &zp, err);
    if (rc) return rc;
    if (zp) {
      free(h.big);
      snprintf(msg, sizeof msg, "member '%s': %s", z->member, zp);
      return bad(err, path, side, what, msg);
    }
  }
  int64_t hdr = 0;
  const char *p = npy_header(h.p, h.avail, t, &hdr, &l->unsupported, l->why, sizeof l->why);
  free(h.big);
  if (p) {
    snprintf(msg, sizeof msg, "member '%s': %s", z->member, p);
    return bad(err, path, side, what, msg);
  }
  if (l->unsupported) return RC_OK;
  if ((uint64_t)hdr + (uint64_t)t->nbytes != z->usize) {
    snprintf(msg, sizeof msg,
             "member '%s': its header declares %" PRId64
             " bytes of data, the member holds %" PRId64,
             z->member, t->nbytes, (int64_t)z->usize - hdr);
    return bad(err, path, side, what, msg);
  }
  t->deflated = z->method == 8;
  t->z_off = (int64_t)data;
  t->z_size = (int64_t)z->csize;
  t->skip = hdr;
  t->data_off = (int64_t)data + hdr;
  return RC_OK;
}

/* Every member in central-directory order; a member that is not a .npy
 * file makes the archive one this tool does not decode. */
static int read_npz(const char *path, const char *side, const rc_cmp_map *m, tensor_list *l,
                    rc_err *err) {
  uint64_t entries = 0, cd_off = 0, cd_size = 0;
  int rc = npz_directory(path, side, m, &entries, &cd_off, &cd_size, err);
  if (rc) return rc;
  const unsigned char *cd = m->data + cd_off, *cd_end = cd + cd_size;
  for (uint64_t k = 0; k < entries; k++) {
    zip_member z;
    uint64_t data = 0;
    if ((rc = npz_entry(path, side, &cd, cd_end, &z, err))) return rc;
    if (!ends_with(z.member, ".npy")) {
      l->unsupported = true;
      snprintf(l->why, sizeof l->why, "member '%.200s' is not a .npy file: not decoded", z.member);
      return RC_OK;
    }
    if ((rc = npz_check_member(path, side, m, cd_off, &z, &data, err))) return rc;
    tensor_t *t = list_push(l, err);
    if (!t) return RC_EXIT_SOFTWARE;
    snprintf(t->name, sizeof t->name, "%.*s", (int)(z.nlen - 4), z.member);
    if ((rc = npz_member(path, side, m, &z, data, t, l, err)) || l->unsupported) return rc;
  }
  return RC_OK;
}

/* ---------------------------------------------------------------------------
 * safetensors. */

static bool st_dtype(const char *d, tensor_t *t) {
  static const struct {
    const char *name, *dtname;
    rc_cmp_el_kind kind;
    size_t size;
  } map[] = {{"F64", "float64", RC_EL_F64, 8},        {"F32", "float32", RC_EL_F32, 4},
             {"F16", "float16", RC_EL_F16, 2},        {"BF16", "bfloat16", RC_EL_BF16, 2},
             {"I64", "int64", RC_EL_INT, 8},          {"I32", "int32", RC_EL_INT, 4},
             {"I16", "int16", RC_EL_INT, 2},          {"I8", "int8", RC_EL_INT, 1},
             {"U64", "uint64", RC_EL_UINT, 8},        {"U32", "uint32", RC_EL_UINT, 4},
             {"U16", "uint16", RC_EL_UINT, 2},        {"U8", "uint8", RC_EL_UINT, 1},
             {"BOOL", "bool", RC_EL_UINT, 1},         {"F8_E4M3", "float8_e4m3", RC_EL_RAW, 1},
             {"F8_E5M2", "float8_e5m2", RC_EL_RAW, 1}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(d, map[i].name)) {
      t->f = (rc_cmp_el_fmt){map[i].kind, map[i].size, !rc_cmp_host_is_le() && map[i].size > 1};
      snprintf(t->dtname, sizeof t->dtname, "%s", map[i].dtname);
      return true;
    }
  return false;
}

/* The JSON header (its length first, then the text), parsed into *root
 * (owned by the caller); *data0: where the data begins. */
static int st_header(const char *path, const char *side, const rc_cmp_map *m, rc_json **root,
                     uint64_t *data0, rc_err *err) {
  const char *what = "safetensors header";
  char msg[700];
  if (m->size < 8) return bad(err, path, side, what, "truncated (shorter than the 8-byte length)");
  uint64_t n = le64(m->data);
  if (n > m->size - 8) {
    snprintf(msg, sizeof msg, "header length %" PRIu64 " runs past the end of the file (%zu bytes)",
             n, m->size);
    return bad(err, path, side, what, msg);
  }
  if (n > ST_MAX_HEADER) return bad(err, path, side, what, "header over 100 MiB (not read)");
  *data0 = 8 + n;
  char jerr[256];
  *root = rc_json_parse((const char *)m->data + 8, (size_t)n, jerr, sizeof jerr);
  if (!*root) {
    snprintf(msg, sizeof msg, "not valid JSON: %s", jerr);
    return bad(err, path, side, what, msg);
  }
  if ((*root)->type != RC_JSON_OBJ) return bad(err, path, side, what, "not a JSON object");
  return RC_OK;
}

/* One tensor's header entry e into a new list entry: dtype, shape, and
 * data_offsets, which must span exactly its bytes inside the data_size
 * bytes that start at data0. */
static int st_tensor(const char *path, const char *side, const rc_json *e, uint64_t data0,
                     uint64_t data_size, tensor_list *l, rc_err *err) {
  const char *what = "safetensors header";
  char msg[700];
  const char *dt = rc_json_get_str(e, "dtype");
  const rc_json *shape = rc_json_get(e, "shape"), *offs = rc_json_get(e, "data_offsets");
  if (strlen(e->key) >= sizeof l->v->name)
    return bad(err, path, side, what, "tensor name over 511 bytes");
  if (e->type != RC_JSON_OBJ || !dt || !shape || shape->type != RC_JSON_ARR || !offs ||
      offs->type != RC_JSON_ARR || offs->nkids != 2) {
    snprintf(msg, sizeof msg, "tensor '%s' lacks dtype, shape or data_offsets [begin, end]",
             e->key);
    return bad(err, path, side, what, msg);
  }
  tensor_t *t = list_push(l, err);
  if (!t) return RC_EXIT_SOFTWARE;
  snprintf(t->name, sizeof t->name, "%s", e->key);
  if (!st_dtype(dt, t)) {
    snprintf(msg, sizeof msg, "tensor '%s': unknown dtype '%.32s'", e->key, dt);
    return bad(err, path, side, what, msg);
  }
  if (shape->nkids > T_MAX_DIM) {
    snprintf(msg, sizeof msg, "tensor '%s': more than %d dimensions", e->key, T_MAX_DIM);
    return bad(err, path, side, what, msg);
  }
  t->ndim = shape->nkids;
  bool ok = true;
  for (int k = 0; k < shape->nkids; k++) {
    const rc_json *d = &shape->kids[k];
    ok = ok && d->type == RC_JSON_NUM && d->is_int && d->i64 >= 0;
    t->dims[k] = ok ? d->i64 : 0;
  }
  const rc_json *b = &offs->kids[0], *en = &offs->kids[1];
  if (!ok || !count_elements(t)) {
    snprintf(msg, sizeof msg, "tensor '%s': shape is not a list of sizes (or overflows)", e->key);
    return bad(err, path, side, what, msg);
  }
  if (b->type != RC_JSON_NUM || !b->is_int || en->type != RC_JSON_NUM || !en->is_int ||
      b->i64 < 0 || en->i64 < b->i64 || (uint64_t)en->i64 > data_size) {
    snprintf(msg, sizeof msg,
             "tensor '%s': data_offsets outside the data (%" PRIu64 " bytes after the header)",
             e->key, data_size);
    return bad(err, path, side, what, msg);
  }
  if (en->i64 - b->i64 != t->nbytes) {
    snprintf(msg, sizeof msg,
             "tensor '%s': data_offsets span %" PRId64 " bytes, %s of %" PRId64
             " elements needs %" PRId64,
             e->key, en->i64 - b->i64, t->dtname, t->n, t->nbytes);
    return bad(err, path, side, what, msg);
  }
  t->data_off = (int64_t)data0 + b->i64;
  return RC_OK;
}

/* The header's tensors in its order; __metadata__ must be an object and
 * is otherwise not read. */
static int read_safetensors(const char *path, const char *side, const rc_cmp_map *m, tensor_list *l,
                            rc_err *err) {
  rc_json *root = NULL;
  uint64_t data0 = 0;
  int rc = st_header(path, side, m, &root, &data0, err);
  uint64_t data_size = m->size - data0;
  for (int i = 0; !rc && i < root->nkids; i++) {
    const rc_json *e = &root->kids[i];
    if (!strcmp(e->key, "__metadata__")) {
      if (e->type != RC_JSON_OBJ)
        rc = bad(err, path, side, "safetensors header", "__metadata__ is not an object");
      continue;
    }
    rc = st_tensor(path, side, e, data0, data_size, l, err);
  }
  rc_json_free(root);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Reading a file's list, and checking what no format allows. */

static int by_name(const void *x, const void *y) {
  return strcmp(((const tensor_t *)x)->name, ((const tensor_t *)y)->name);
}

static int by_offset(const void *x, const void *y) {
  const tensor_t *a = *(const tensor_t *const *)x, *b = *(const tensor_t *const *)y;
  int64_t oa = a->deflated ? a->z_off : a->data_off, ob = b->deflated ? b->z_off : b->data_off;
  return oa < ob ? -1 : oa > ob;
}

static int read_list(tensor_format fmt, const char *path, const char *side, const char *tname,
                     const rc_cmp_map *m, tensor_list *l, rc_err *err) {
  static const char *what[] = {".npy file", ".npz archive", "safetensors header"};
  int rc = fmt == TF_NPY   ? read_npy(path, side, tname, m, l, err)
           : fmt == TF_NPZ ? read_npz(path, side, m, l, err)
                           : read_safetensors(path, side, m, l, err);
  if (rc || l->unsupported || l->n == 0) return rc;
  qsort(l->v, (size_t)l->n, sizeof *l->v, by_name);
  char msg[1200];
  for (int i = 1; i < l->n; i++)
    if (!strcmp(l->v[i].name, l->v[i - 1].name)) {
      snprintf(msg, sizeof msg, "tensor '%s' appears twice", l->v[i].name);
      return bad(err, path, side, what[fmt], msg);
    }
  /* no two tensors' bytes may overlap (empty ones take no bytes) */
  const tensor_t **o = malloc(sizeof *o * (size_t)l->n);
  if (!o) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int k = 0;
  for (int i = 0; i < l->n; i++)
    if ((l->v[i].deflated ? l->v[i].z_size : l->v[i].nbytes) > 0) o[k++] = &l->v[i];
  qsort(o, (size_t)k, sizeof *o, by_offset);
  for (int i = 1; i < k && !rc; i++) {
    const tensor_t *a = o[i - 1], *b = o[i];
    int64_t a_end = a->deflated ? a->z_off + a->z_size : a->data_off + a->nbytes;
    int64_t b_off = b->deflated ? b->z_off : b->data_off;
    if (b_off < a_end) {
      snprintf(msg, sizeof msg, "tensors '%s' and '%s' overlap", a->name, b->name);
      rc = bad(err, path, side, what[fmt], msg);
    }
  }
  free(o);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Comparing. */

static void shape_text(const tensor_t *t, char *out, size_t cap) {
  size_t len = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < t->ndim && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%" PRId64, i ? "," : "", t->dims[i]);
  if (len < cap) snprintf(out + len, cap - len, "]%s", t->fortran ? " (fortran order)" : "");
}

/* The position of flat element `flat` in storage order: row-major, or
 * column-major for a fortran-order array. */
static void index_text(const tensor_t *t, int64_t flat, char *out, size_t cap) {
  int64_t idx[T_MAX_DIM];
  int64_t rest = flat;
  for (int k = 0; k < t->ndim; k++) {
    int i = t->fortran ? k : t->ndim - 1 - k;
    idx[i] = t->dims[i] ? rest % t->dims[i] : 0;
    rest = t->dims[i] ? rest / t->dims[i] : 0;
  }
  size_t len = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < t->ndim && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%" PRId64, i ? "," : "", idx[i]);
  if (len < cap) snprintf(out + len, cap - len, "]");
}

/* One side's data, block by block: in place, or inflated into buf. */
typedef struct {
  const rc_cmp_map *m;
  const tensor_t *t;
  inflater z;
  unsigned char *buf;
} tsrc;

static const char *tsrc_open(tsrc *s, const rc_cmp_map *m, const tensor_t *t) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->t = t;
  if (!t->deflated) return NULL;
  size_t cap = T_BLOCK > (size_t)t->skip ? T_BLOCK : (size_t)t->skip;
  s->buf = malloc(cap);
  if (!s->buf || !inflater_open(&s->z, m->data + t->z_off, t->z_size)) return "out of memory";
  return inflater_read(&s->z, s->buf, (size_t)t->skip); /* past the .npy header */
}

static const char *tsrc_next(tsrc *s, int64_t pos, size_t n, const unsigned char **out) {
  if (!s->t->deflated) {
    *out = s->m->data + s->t->data_off + pos;
    return NULL;
  }
  *out = s->buf;
  return inflater_read(&s->z, s->buf, n);
}

static void tsrc_close(tsrc *s) {
  inflater_close(&s->z);
  free(s->buf);
}

static int compare_values(rc_cmp_ctx *c, const char *file_rel, const char *pa, const char *pb,
                          const rc_cmp_map *ma, const rc_cmp_map *mb, const tensor_t *ta,
                          const tensor_t *tb, rc_err *err) {
  if (ta->n == 0 || ta->f.size == 0) return RC_OK;
  tsrc sa, sb;
  const char *pr = tsrc_open(&sa, ma, ta), *bad_path = pa;
  if (!pr) {
    pr = tsrc_open(&sb, mb, tb);
    bad_path = pb;
  } else {
    memset(&sb, 0, sizeof sb);
  }
  rc_cmp_stats st = {0};
  st.first_index = -1;
  const size_t per = T_BLOCK / ta->f.size; /* elements per block */
  for (int64_t i = 0; !pr && i < ta->n; i += (int64_t)per) {
    size_t k = ta->n - i < (int64_t)per ? (size_t)(ta->n - i) : per;
    const unsigned char *xa, *xb;
    int64_t pos = i * (int64_t)ta->f.size;
    bad_path = pa;
    if ((pr = tsrc_next(&sa, pos, k * ta->f.size, &xa))) break;
    bad_path = pb;
    if ((pr = tsrc_next(&sb, pos, k * ta->f.size, &xb))) break;
    if (memcmp(xa, xb, k * ta->f.size)) rc_cmp_scan(&st, &ta->f, xa, xb, k, i);
  }
  tsrc_close(&sa);
  tsrc_close(&sb);
  if (pr)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: tensor '%s' cannot be read: %s", bad_path, ta->name,
                   pr);
  if (st.n_different) {
    char shp[T_MAX_DIM * 21 + 32], idx[T_MAX_DIM * 21 + 8];
    shape_text(ta, shp, sizeof shp);
    index_text(ta, st.first_index, idx, sizeof idx);
    rc_cmp_add_values(c, file_rel, ta->name, ta->dtname, shp, idx, ta->n, &ta->f, &st);
  }
  return RC_OK;
}

int rc_cmp_tensors(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                   const rc_cmp_map *ma, const rc_cmp_map *mb, bool *decoded, char *why,
                   size_t why_cap, rc_err *err) {
  const char *name = file_rel[0] ? file_rel : path_a;
  tensor_format fmt = ends_with(name, ".npy")   ? TF_NPY
                      : ends_with(name, ".npz") ? TF_NPZ
                                                : TF_SAFETENSORS;
  static const rc_cmp_map empty = {NULL, 0};
  if (!ma->data) ma = &empty; /* an empty file: every reader says truncated */
  if (!mb->data) mb = &empty;
  static const unsigned char nothing[1] = {0};
  rc_cmp_map xa = {ma->data ? ma->data : nothing, ma->size};
  rc_cmp_map xb = {mb->data ? mb->data : nothing, mb->size};
  tensor_list la = {0}, lb = {0};
  *decoded = false;
  /* a .npy file holds one array: named after the file (exp_avg.npy: exp_avg),
   * the same name on both sides */
  const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
  char tname[512];
  snprintf(tname, sizeof tname, "%.*s", (int)(strlen(base) - 4), base);
  int rc = read_list(fmt, path_a, "A", tname, &xa, &la, err);
  if (!rc) rc = read_list(fmt, path_b, "B", tname, &xb, &lb, err);
  if (rc) goto done;
  if (la.unsupported || lb.unsupported) {
    snprintf(why, why_cap, "%s: %s; compared as bytes", la.unsupported ? "A" : "B",
             la.unsupported ? la.why : lb.why);
    goto done;
  }
  *decoded = true;
  int i = 0, k = 0;
  while (!rc && (i < la.n || k < lb.n)) {
    int cmp = i == la.n ? 1 : k == lb.n ? -1 : strcmp(la.v[i].name, lb.v[k].name);
    const tensor_t *ta = cmp <= 0 ? &la.v[i] : NULL, *tb = cmp >= 0 ? &lb.v[k] : NULL;
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
    const tensor_t *t = ta ? ta : tb;
    char sa[T_MAX_DIM * 21 + 32], sb[T_MAX_DIM * 21 + 32];
    shape_text(t, sa, sizeof sa);
    if (!ta || !tb) {
      rc_cmp_add(c, ta ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, file_rel, t->name,
                 "tensor only in %s (%s%s)", ta ? "A" : "B", t->dtname, sa);
      continue;
    }
    if (rc_cmp_ignored(c, file_rel, t->name)) {
      c->n_ignored++;
      continue;
    }
    c->res->n_datasets_compared++;
    shape_text(tb, sb, sizeof sb);
    if (strcmp(ta->dtname, tb->dtname))
      rc_cmp_add(c, RC_DIFF_DTYPE, file_rel, t->name, "%s%s vs %s%s", ta->dtname, sa, tb->dtname,
                 sb);
    else if (strcmp(sa, sb))
      rc_cmp_add(c, RC_DIFF_SHAPE, file_rel, t->name, "%s%s vs %s%s", ta->dtname, sa, tb->dtname,
                 sb);
    else
      rc = compare_values(c, file_rel, path_a, path_b, &xa, &xb, ta, tb, err);
  }
done:
  free(la.v);
  free(lb.v);
  return rc;
}
