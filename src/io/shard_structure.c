/* shard_structure.c — the structure check before libhdf5 parses a shard
 * (rc_check_shard_structure) and the same check as a yes/no for other
 * readers (rc_shard_structure_is_ours, checkpoint.h).
 *
 * A walk over the raw bytes, with no HDF5 call: it must bound every
 * length before libhdf5 believes one (why: the section comment below).
 * Its own file because it is the one part of io that reads untrusted
 * metadata byte by byte. */
#include "io/checkpoint_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"

/* ---- the structure check before libhdf5 parses a shard.
 *
 * Shards are superblock version 0 with version 1 object headers and
 * symbol-table groups (libver EARLIEST..V18, shard_write.c): metadata without
 * checksums, whose length fields libhdf5 1.10 believes. Its metadata cache
 * mallocs the length an object header continuation message or a local heap
 * states before it reads a byte, and only the read is bounded by the
 * end-of-allocation address, so a forged length makes it allocate gigabytes
 * (robust_fuzz: malloc(4295491589) and a 2^64-scale request in H5C_protect).
 * The SHA-256 check stops corruption, not forgery (docs/robustness.md), so
 * before H5Fopen the loader checks the superblock, then walks every object
 * header, group B-tree node, symbol table node and local heap that libhdf5
 * can reach from the root group and refuses the image unless each lies
 * inside it. The walk admits only what resumecheck writes (these message
 * types, contiguous layouts, integer, float and fixed-string types, hard
 * links), so libhdf5 never meets a structure the walk has not bounded; and
 * the walk is bounded itself: its work by the image size, its depth by
 * RC_PATH_MAX. `resumecheck inspect` reads other writers' files and skips it. */

#define ADDR_UNDEF UINT64_MAX /* an undefined address: all bits set */

enum {
  SB_SIZE = 96,                      /* superblock v0 with 8-byte offsets and lengths */
  SB_ROOT_ENTRY = 56,                /* where its root group's symbol table entry starts */
  ENTRY_SIZE = 40,                   /* a symbol table entry */
  OH_PREFIX = 16,                    /* a version 1 object header's prefix, padded to 8 */
  BTREE_MAX_LEVEL = 16,              /* recursion cap; a group's B-tree is a few levels deep */
  GROUP_MAX_DEPTH = RC_PATH_MAX / 2, /* "/a/b/...": 2 characters a level */
  HEAP_FREE_NULL = 1,                /* the end of a local heap's free list */
};

/* The object header messages a shard has. */
enum {
  MSG_NULL = 0x0000,
  MSG_DATASPACE = 0x0001,
  MSG_DATATYPE = 0x0003,
  MSG_FILL = 0x0005,
  MSG_LAYOUT = 0x0008,
  MSG_ATTRIBUTE = 0x000C,
  MSG_CONTINUATION = 0x0010,
  MSG_SYMBOL_TABLE = 0x0011,
};

typedef struct {
  const unsigned char *p;
  uint64_t size;   /* of the image, and so its end-of-file address */
  unsigned leaf_k; /* a symbol table node holds up to 2 * leaf_k links */
  unsigned node_k; /* a group B-tree node holds up to 2 * node_k children */
  uint64_t budget; /* structures and entries the walk may still visit */
  int code;        /* RC_EXIT_DATAERR, or RC_EXIT_SOFTWARE when out of memory */
  char why[256];
} shard_walk;

typedef struct {
  uint64_t data, size; /* a local heap's data segment: a group's link names */
} heap_ref;

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* [addr, addr + len) lies inside the image; no sum that could overflow */
static bool inside(const shard_walk *w, uint64_t addr, uint64_t len) {
  return addr <= w->size && len <= w->size - addr;
}

static bool bad(shard_walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(shard_walk *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->why, sizeof w->why, fmt, ap);
  va_end(ap);
  return false;
}

/* One unit of work: a structure or one of its entries. Each takes at least
 * 8 bytes of a file whose structures are not shared (resumecheck shares none),
 * so running out means the metadata loops back on itself. */
static bool spend(shard_walk *w) {
  if (w->budget == 0)
    return bad(w, "more metadata than %" PRIu64 " bytes can hold (it loops)", w->size);
  w->budget--;
  return true;
}

static uint64_t btree_node_size(const shard_walk *w) {
  /* header 24, then 2K child addresses and 2K + 1 keys (heap offsets) */
  return 24 + 16 * (uint64_t)w->node_k + 8 * (2 * (uint64_t)w->node_k + 1);
}

static uint64_t symbol_node_size(const shard_walk *w) {
  return 8 + 2 * (uint64_t)w->leaf_k * ENTRY_SIZE;
}

/* The superblock as shard_write.c's libver bounds make it: version 0 (and
 * version 0 of the free-space, root entry and shared header formats), 8-byte
 * offsets and lengths, base address 0, no free-space or driver info block,
 * and an end-of-file address equal to the image's size: libhdf5 bounds its
 * reads by that address, so it must not claim bytes that are not there. */
static bool check_superblock(shard_walk *w) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const unsigned char *p = w->p;
  if (w->size < SB_SIZE || memcmp(p, sig, sizeof sig))
    return bad(w, "superblock: no HDF5 signature at offset 0");
  if (p[8] != 0) return bad(w, "superblock: version %u, a shard's is 0", p[8]);
  if (p[9] || p[10] || p[12])
    return bad(w, "superblock: free-space, root entry or shared header format version is not 0");
  if (p[13] != 8 || p[14] != 8)
    return bad(w, "superblock: %u-byte offsets and %u-byte lengths, a shard's are 8 and 8", p[13],
               p[14]);
  w->leaf_k = (unsigned)le(p + 16, 2);
  w->node_k = (unsigned)le(p + 18, 2);
  if (w->leaf_k == 0 || w->node_k == 0 || symbol_node_size(w) > w->size ||
      btree_node_size(w) > w->size)
    return bad(w, "superblock: group node sizes (K %u and %u) do not fit in the file", w->leaf_k,
               w->node_k);
  if (le(p + 24, 8) != 0) return bad(w, "superblock: base address is not 0");
  if (le(p + 32, 8) != ADDR_UNDEF || le(p + 48, 8) != ADDR_UNDEF)
    return bad(w, "superblock: has a free-space or driver info block address");
  uint64_t eof = le(p + 40, 8);
  if (eof != w->size)
    return bad(w, "superblock: end-of-file address %" PRIu64 ", the file has %" PRIu64 " bytes",
               eof, w->size);
  return true;
}

/* A symbol table entry: a hard link, with nothing cached (0) or its group's
 * B-tree and heap addresses (1); soft links (2) are not shard content. */
static bool check_entry(shard_walk *w, const unsigned char *e, uint64_t *object) {
  uint64_t at = (uint64_t)(e - w->p), cache = le(e + 16, 4);
  if (cache > 1)
    return bad(w, "symbol table entry at %" PRIu64 ": cache type %" PRIu64 " (not a hard link)", at,
               cache);
  if (cache == 1 && (!inside(w, le(e + 24, 8), 1) || !inside(w, le(e + 32, 8), 1)))
    return bad(w, "symbol table entry at %" PRIu64 ": cached addresses outside the file", at);
  *object = le(e + 8, 8);
  return true;
}

/* A link name: a NUL-terminated string inside the group's heap, no longer
 * than a path may be (which also bounds the scan). */
static bool check_name(shard_walk *w, const heap_ref *h, uint64_t off) {
  if (off < h->size) {
    uint64_t n = h->size - off < RC_PATH_MAX ? h->size - off : RC_PATH_MAX;
    if (memchr(w->p + h->data + off, 0, (size_t)n)) return true;
  }
  return bad(w, "local heap data at %" PRIu64 ": no link name at offset %" PRIu64, h->data, off);
}

static bool check_object_header(shard_walk *w, uint64_t addr, int depth);

static bool check_symbol_node(shard_walk *w, uint64_t addr, const heap_ref *h, int depth) {
  if (!spend(w)) return false;
  if (!inside(w, addr, symbol_node_size(w)))
    return bad(w, "symbol table node at %" PRIu64 " runs past the end of the file", addr);
  const unsigned char *p = w->p + addr;
  unsigned n = (unsigned)le(p + 6, 2);
  if (memcmp(p, "SNOD", 4) || p[4] != 1)
    return bad(w, "no version 1 symbol table node at %" PRIu64, addr);
  if (n > 2 * w->leaf_k)
    return bad(w, "symbol table node at %" PRIu64 ": %u links, at most %u fit", addr, n,
               2 * w->leaf_k);
  for (unsigned i = 0; i < n; i++) {
    const unsigned char *e = p + 8 + i * ENTRY_SIZE;
    uint64_t object;
    if (!spend(w) || !check_name(w, h, le(e, 8)) || !check_entry(w, e, &object) ||
        !check_object_header(w, object, depth + 1))
      return false;
  }
  return true;
}

/* A group B-tree node (version 1, type 0): keys are link names in the
 * group's heap; children are nodes one level down, or symbol table nodes at
 * level 0. want_level < 0: the root, any level. */
static bool check_btree_node(shard_walk *w, uint64_t addr, int want_level, const heap_ref *h,
                             int depth) {
  if (!spend(w)) return false;
  uint64_t size = btree_node_size(w);
  if (!inside(w, addr, size))
    return bad(w, "group B-tree node at %" PRIu64 " runs past the end of the file", addr);
  const unsigned char *p = w->p + addr;
  unsigned level = p[5], n = (unsigned)le(p + 6, 2);
  if (memcmp(p, "TREE", 4) || p[4] != 0) return bad(w, "no group B-tree node at %" PRIu64, addr);
  if (level > BTREE_MAX_LEVEL || (want_level >= 0 && level != (unsigned)want_level))
    return bad(w, "group B-tree node at %" PRIu64 ": level %u out of place", addr, level);
  if (n > 2 * w->node_k)
    return bad(w, "group B-tree node at %" PRIu64 ": %u children, at most %u fit", addr, n,
               2 * w->node_k);
  for (int s = 8; s <= 16; s += 8) {
    uint64_t sibling = le(p + s, 8);
    if (sibling != ADDR_UNDEF && !inside(w, sibling, size))
      return bad(w, "group B-tree node at %" PRIu64 ": sibling outside the file", addr);
  }
  for (unsigned i = 0; i <= n; i++)
    if (!check_name(w, h, le(p + 24 + 16 * i, 8))) return false;
  for (unsigned i = 0; i < n; i++) {
    uint64_t child = le(p + 32 + 16 * i, 8);
    bool ok = level > 0 ? check_btree_node(w, child, (int)level - 1, h, depth)
                        : check_symbol_node(w, child, h, depth);
    if (!ok) return false;
  }
  return true;
}

/* A local heap (version 0): its data segment inside the file, and a free
 * list of (next offset, size) blocks inside the data that ends. */
static bool check_local_heap(shard_walk *w, uint64_t addr, heap_ref *h) {
  if (!spend(w)) return false;
  if (!inside(w, addr, 32) || memcmp(w->p + addr, "HEAP", 4) || w->p[addr + 4] != 0)
    return bad(w, "no version 0 local heap at %" PRIu64, addr);
  const unsigned char *p = w->p + addr;
  h->size = le(p + 8, 8);
  h->data = le(p + 24, 8);
  if (!inside(w, h->data, h->size))
    return bad(w,
               "local heap at %" PRIu64 ": %" PRIu64 " bytes of data at %" PRIu64
               " run past the end of the file",
               addr, h->size, h->data);
  for (uint64_t off = le(p + 16, 8); off != HEAP_FREE_NULL;) {
    if (!spend(w)) return false;
    if (off >= h->size || h->size - off < 16 || le(w->p + h->data + off + 8, 8) > h->size - off)
      return bad(w, "local heap at %" PRIu64 ": free block at offset %" PRIu64 " outside its data",
                 addr, off);
    off = le(w->p + h->data + off, 8);
  }
  return true;
}

/* Dataspace version 1: rank <= 32, dimensions (and maximum dimensions)
 * inside the message; *points = their product. */
static bool check_dataspace(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len,
                            uint64_t *points) {
  if (len < 8 || b[0] != 1)
    return bad(w, "object header at %" PRIu64 ": dataspace is not version 1", oh);
  unsigned rank = b[1], flags = b[2];
  if (rank > 32 || (flags & ~1u))
    return bad(w, "object header at %" PRIu64 ": dataspace of rank %u, flags 0x%x", oh, rank,
               flags);
  if (8 + 8 * (uint64_t)rank * (flags & 1 ? 2 : 1) > len)
    return bad(w, "object header at %" PRIu64 ": dataspace cut off", oh);
  uint64_t n = 1;
  for (unsigned r = 0; r < rank; r++) {
    uint64_t d = le(b + 8 + 8 * r, 8);
    if (d != 0 && n > UINT64_MAX / d)
      return bad(w, "object header at %" PRIu64 ": dataspace of more than 2^64 elements", oh);
    n *= d;
  }
  *points = n;
  return true;
}

/* Datatype: integer, float or fixed-length string (class 0, 1, 3), the only
 * ones in a shard; their properties are fixed-size. */
static bool check_datatype(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len,
                           uint64_t *size) {
  if (len < 8) return bad(w, "object header at %" PRIu64 ": datatype cut off", oh);
  unsigned cls = b[0] & 0x0f;
  if (cls != 0 && cls != 1 && cls != 3)
    return bad(w,
               "object header at %" PRIu64 ": datatype class %u is not an integer, float or string",
               oh, cls);
  *size = le(b + 4, 4);
  if (*size == 0 || 8 + (cls == 0 ? 4 : cls == 1 ? 12 : 0) > len)
    return bad(w, "object header at %" PRIu64 ": datatype cut off or of size 0", oh);
  return true;
}

/* Attribute version 1: name, datatype and dataspace padded to 8 bytes, then
 * the value, which must fit in what is left of the message. */
static bool check_attribute(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  if (len < 8 || b[0] != 1)
    return bad(w, "object header at %" PRIu64 ": attribute message is not version 1", oh);
  uint64_t name_len = le(b + 2, 2), type_len = le(b + 4, 2), space_len = le(b + 6, 2);
  uint64_t type_at = 8 + (name_len + 7) / 8 * 8, space_at = type_at + (type_len + 7) / 8 * 8;
  uint64_t value_at = space_at + (space_len + 7) / 8 * 8, type_size, points;
  if (value_at > len) return bad(w, "object header at %" PRIu64 ": attribute cut off", oh);
  if (name_len == 0 || b[8 + name_len - 1] != 0)
    return bad(w, "object header at %" PRIu64 ": attribute name is not a string", oh);
  if (!check_datatype(w, oh, b + type_at, type_len, &type_size) ||
      !check_dataspace(w, oh, b + space_at, space_len, &points))
    return false;
  if (points > (len - value_at) / type_size)
    return bad(w, "object header at %" PRIu64 ": attribute value larger than its message", oh);
  return true;
}

/* Fill value (new) message, versions 1-3: a defined value must fit in the
 * message (libhdf5 mallocs and copies the size it states). */
static bool check_fill(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  uint64_t at, size;
  if (len >= 4 && (b[0] == 1 || b[0] == 2)) {
    if (!b[3]) return true; /* no value defined */
    at = 8;
    size = len >= at ? le(b + 4, 4) : 0;
    if (size >= 0x80000000u) size = 0; /* negative: "no value" */
  } else if (len >= 2 && b[0] == 3) {
    if (!(b[1] & 0x20)) return true; /* no value stored */
    at = 6;
    size = len >= at ? le(b + 2, 4) : 0;
  } else {
    return bad(w, "object header at %" PRIu64 ": fill value message is not version 1, 2 or 3", oh);
  }
  if (len < at || size > len - at)
    return bad(w, "object header at %" PRIu64 ": fill value larger than its message", oh);
  return true;
}

/* Layout version 3, contiguous: the data inside the file (or not allocated). */
static bool check_layout(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  if (len < 18 || b[0] != 3 || b[1] != 1)
    return bad(w, "object header at %" PRIu64 ": layout is not a version 3 contiguous one", oh);
  uint64_t addr = le(b + 2, 8), size = le(b + 10, 8);
  if (addr != ADDR_UNDEF && !inside(w, addr, size))
    return bad(w,
               "object header at %" PRIu64 ": %" PRIu64 " bytes of data at %" PRIu64
               " run past the end of the file",
               oh, size, addr);
  return true;
}

static bool check_message(shard_walk *w, uint64_t oh, unsigned type, const unsigned char *b,
                          uint64_t len, int depth) {
  uint64_t unused;
  heap_ref h;
  switch (type) {
  case MSG_NULL:
    return true;
  case MSG_DATASPACE:
    return check_dataspace(w, oh, b, len, &unused);
  case MSG_DATATYPE:
    return check_datatype(w, oh, b, len, &unused);
  case MSG_FILL:
    return check_fill(w, oh, b, len);
  case MSG_LAYOUT:
    return check_layout(w, oh, b, len);
  case MSG_ATTRIBUTE:
    return check_attribute(w, oh, b, len);
  case MSG_SYMBOL_TABLE:
    if (len < 16) return bad(w, "object header at %" PRIu64 ": symbol table message cut off", oh);
    return check_local_heap(w, le(b + 8, 8), &h) && check_btree_node(w, le(b, 8), -1, &h, depth);
  default:
    return bad(w, "object header at %" PRIu64 ": message type 0x%04x is not one a shard has", oh,
               type);
  }
}

/* Object header version 1: chunk 0 after the prefix, then each chunk a
 * continuation message names, every one inside the file and made of whole
 * messages, no more of them than the prefix counts. */
static bool check_object_header(shard_walk *w, uint64_t addr, int depth) {
  if (!spend(w)) return false;
  if (depth > GROUP_MAX_DEPTH) return bad(w, "groups nested more than %d deep", GROUP_MAX_DEPTH);
  if (!inside(w, addr, OH_PREFIX))
    return bad(w, "object header at %" PRIu64 " lies outside the file", addr);
  const unsigned char *p = w->p + addr;
  if (p[0] != 1) return bad(w, "object header at %" PRIu64 ": version %u, not 1", addr, p[0]);
  uint64_t nmesgs = le(p + 2, 2), seen = 0;
  typedef struct {
    uint64_t addr, len;
  } chunk;
  chunk first = {addr + OH_PREFIX, le(p + 8, 4)}, *chunks = &first;
  size_t nchunks = 1, cap = 1;
  bool ok = true;
  for (size_t c = 0; ok && c < nchunks; c++) {
    uint64_t at = chunks[c].addr, len = chunks[c].len;
    if (!inside(w, at, len)) {
      ok = bad(w,
               "object header at %" PRIu64 ": chunk of %" PRIu64 " bytes at %" PRIu64
               " runs past the end of the file",
               addr, len, at);
      break;
    }
    if (len == 0) {
      ok = bad(w, "object header at %" PRIu64 ": empty chunk at %" PRIu64, addr, at);
      break;
    }
    for (uint64_t end = at + len; ok && at < end;) {
      const unsigned char *m = w->p + at;
      if (end - at < 8 || le(m + 2, 2) > end - at - 8) {
        ok = bad(w, "object header at %" PRIu64 ": message at %" PRIu64 " cut off", addr, at);
        break;
      }
      uint64_t size = le(m + 2, 2);
      unsigned type = (unsigned)le(m, 2);
      if (++seen > nmesgs) {
        ok = bad(w, "object header at %" PRIu64 ": more messages than its %" PRIu64, addr, nmesgs);
      } else if (m[4] & 0x02) {
        ok = bad(w, "object header at %" PRIu64 ": shared message (type 0x%04x)", addr, type);
      } else if (type == MSG_CONTINUATION) {
        if (size < 16) {
          ok = bad(w, "object header at %" PRIu64 ": continuation message cut off", addr);
        } else if (nchunks == cap) {
          chunk *more = malloc(2 * cap * sizeof *more);
          if (!more) {
            w->code = RC_EXIT_SOFTWARE;
            ok = bad(w, "out of memory");
          } else {
            memcpy(more, chunks, nchunks * sizeof *more);
            if (chunks != &first) free(chunks);
            chunks = more;
            cap *= 2;
          }
        }
        if (ok) chunks[nchunks++] = (chunk){le(m + 8, 8), le(m + 16, 8)};
      } else {
        ok = spend(w) && check_message(w, addr, type, m + 8, size, depth);
      }
      at += 8 + size;
    }
  }
  if (chunks != &first) free(chunks);
  return ok;
}

/* Why: see the section comment. RC_OK, or RC_EXIT_DATAERR naming the part. */
int rc_check_shard_structure(const rc_h5_image_ref *ref, const char *what, rc_err *err) {
  shard_walk w = {.p = ref->buf, .size = ref->size, .code = RC_EXIT_DATAERR};
  w.budget = w.size / 8 + 64;
  if (check_superblock(&w)) {
    uint64_t root;
    if (check_entry(&w, w.p + SB_ROOT_ENTRY, &root) && check_object_header(&w, root, 0))
      return RC_OK;
  }
  return rc_fail(err, w.code, "%s: not an HDF5 file as resumecheck writes it: %s", what, w.why);
}

bool rc_shard_structure_is_ours(const void *data, size_t size) {
  rc_h5_image_ref ref = {data, size};
  rc_err err = {0};
  return size > 0 && rc_check_shard_structure(&ref, "", &err) == RC_OK;
}
