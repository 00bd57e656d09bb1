/* checkpoint_internal.h — what the pieces of the checkpoint layer share:
 * the manifest in memory (manifest.c), building a shard's HDF5 image
 * (shard_write.c) and the memory it lives in (shard_image.c), reading and
 * verifying a shard file (shard_verify.c), checking its structure
 * (shard_structure.c) and the HDF5 helpers that open and read one from
 * memory (h5_util.c). Not part of the public io interface: callers use
 * checkpoint.h. */
#ifndef RC_IO_CHECKPOINT_INTERNAL_H
#define RC_IO_CHECKPOINT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <hdf5.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "io/h5_type.h"
#include "io/layout.h"
#include "io/manifest.h"
#include "io/sha256.h"
#include "io/state.h"

#define RC_MANIFEST_FORMAT "resumecheck-checkpoint"
#define RC_FRAGMENT_FORMAT "resumecheck-manifest-fragment"
/* Caps on what a load reads of the metadata (docs/robustness.md): a
 * manifest lists ~150 bytes per dataset, so 64 MiB is ~400k datasets; the
 * marker is one sha256sum line. */
#define RC_MANIFEST_MAX ((size_t)64 << 20)
#define RC_MARKER_MAX ((size_t)4096)

/* ---- manifest.c (the types and the parser: manifest.h) ---- */

bool rc_dtype_from_name(const char *name, rc_dtype *dt);

/* Canonical texts (malloc'd, newline-terminated): equal inputs, equal bytes. */
char *rc_manifest_text(const rc_manifest *m, size_t *len);
char *rc_fragment_text(int64_t iteration, int world_size, bool hashes_only, const rc_mf_shard *s,
                       size_t *len);

/* Strict parse of a fragment, as rc_manifest_parse (manifest.h). */
int rc_fragment_parse(const char *text, size_t n, const char *what, int64_t *iteration,
                      int *world_size, bool *hashes_only, rc_mf_shard *s, rc_err *err);

/* ---- handoff.c (the reader: checkpoint.h) ---- */

/* Publishes ITER_DIR.handoff.json for the shard written to temp_file (a
 * name in iter_dir) whose entry, without the whole-file hash, is shard. */
int rc_handoff_write(const char *iter_dir, int64_t iteration, const char *temp_file,
                     const rc_mf_shard *shard, rc_err *err);
/* Removes it (nothing when there is none). */
void rc_handoff_remove(const char *iter_dir);

/* ---- shard_write.c ---- */

/* The libver bounds every shard is written with (see shard_write.c). */
#define RC_SHARD_LIBVER_LOW H5F_LIBVER_EARLIEST
#define RC_SHARD_LIBVER_HIGH H5F_LIBVER_V18

/* A shard's HDF5 file, ready to write: the metadata image (the core
 * driver's own buffer, taken over at file close) with each dataset's raw
 * data left to come straight from the caller's tensor buffers. The file is
 * the concatenation of `pieces`, in order. See shard_write.c. */
typedef struct {
  unsigned char *data; /* metadata image; raw-data regions are never touched */
  size_t size;         /* the whole file: bytes [0, size) */
  size_t cap;          /* the mapping behind data */
  rc_piece *pieces;    /* malloc'd: image ranges and tensor buffers, in file order */
  int npieces;
  bool meta_spilled; /* metadata outgrew rc_shard_meta_block (slower, still correct) */
  uint64_t *offset;  /* malloc'd, built images: file offset of tensor i's bytes (0: empty) */
  int count;         /* tensors in offset */
  bool borrowed;     /* data is the caller's buffer (a load into it): not unmapped */
} rc_shard_image;

/* The size of the one metadata block a shard of this state gets. */
size_t rc_shard_meta_block(const rc_shard_meta *meta, const rc_state *state);

int rc_shard_build_image(const rc_shard_meta *meta, const rc_state *state, rc_shard_image *image,
                         rc_err *err);
/* The same without the tensors' bytes: only their places (offset[]) and
 * the metadata; the tensors' data pointers are not read (may be NULL), and
 * their pieces are NULL until rc_shard_image_place puts the whole file in
 * one caller buffer of at least `size` bytes, which the caller then fills
 * at the offsets. The bytes are those rc_shard_build_image would give. */
int rc_shard_build_layout(const rc_shard_meta *meta, const rc_state *state, rc_shard_image *image,
                          rc_err *err);
int rc_shard_image_place(rc_shard_image *image, unsigned char *buf, rc_err *err);
/* qsort_r comparator of int indices by keys[index] (a const uint64_t *
 * passed as ctx), ties by index: sorts datasets or jobs into file order
 * the same way every time. */
int rc_cmp_index_by_u64(const void *a, const void *b, void *keys);

/* ---- shard_image.c ---- */

void rc_shard_image_free(rc_shard_image *image);
/* An anonymous mapping of at least n bytes, 2 MiB-aligned, with huge pages
 * requested; zero-filled. NULL on failure. Free with rc_shard_image_free. */
unsigned char *rc_map_image(size_t n, size_t *cap);

/* ---- h5_util.c ---- */

/* Silences HDF5's automatic error-stack printing for the duration of a call
 * and restores whatever the process had before. */
typedef struct {
  H5E_auto2_t fn;
  void *data;
} rc_h5_quiet;
void rc_h5_quiet_begin(rc_h5_quiet *q);
void rc_h5_quiet_end(const rc_h5_quiet *q);

/* rc_fail with HDF5's own reason (innermost error on the stack) appended. */
int rc_h5_fail(rc_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Every HDF5 call is checked: a negative return records the message (with
 * HDF5's reason), sets `ret` and jumps to `done`. */
#define H5_CHECK(call, code, ...)                                                                  \
  do {                                                                                             \
    if ((call) < 0) {                                                                              \
      ret = rc_h5_fail(err, (code), __VA_ARGS__);                                                  \
      goto done;                                                                                   \
    }                                                                                              \
  } while (0)

/* The file type each dtype is stored as (always little-endian) and the
 * matching native memory type. */
hid_t rc_h5_file_type(rc_dtype dt);
hid_t rc_h5_mem_type(rc_dtype dt);

/* ---- shard_verify.c ---- */

/* Reads a whole shard into a mapping (or into dst, at least size + 1
 * bytes, when not NULL), hashing it chunk by chunk as it is read (one pass
 * over the bytes, cache-warm). With expect_size >= 0 a file
 * of another size is rejected before a byte is read: RC_EXIT_DATAERR,
 * "truncated" or "wrong size". RC_EXIT_NOINPUT if it does not exist. */
int rc_read_shard(const char *path, int64_t expect_size, unsigned char *dst, rc_shard_image *out,
                  char hex[RC_SHA256_HEX], rc_err *err);

/* rc_read_shard against a manifest entry: size, then every byte verified as
 * it is read, by the chunk hashes on `threads` threads (<= 0: the online
 * CPUs) where the entry has them, else by the whole-file SHA-256.
 * RC_EXIT_DATAERR: "truncated", "wrong size" or "corrupt" (for a chunk
 * naming its byte range [start, end)). The image is the caller's; with
 * dst (at least bytes + 1) it is read there, else into a mapping of its
 * own. Chunks are read by the hashing threads themselves, each its own
 * range at once (pread), so a load from the page cache runs at memory
 * speed rather than one reader's. */
typedef struct {
  int count;                   /* byte ranges [start[i], end[i]) of the file */
  const uint64_t *start, *end; /* sorted by start, so the hashes follow the reads */
  int threads;
  char (*hex)[RC_SHA256_HEX]; /* their SHA-256s; "" where not hashed */
  /* landed (may be NULL): called on a thread of its own with each range's
   * index, in order, once its bytes are in dst (read, not yet verified) */
  void (*landed)(void *ctx, int range);
  void *landed_ctx;
} rc_read_follow;
/* follow (may be NULL; used only with dst and chunk hashes): ranges hashed
 * from dst on threads of their own as the chunks land, at the same time
 * as the chunks are read and verified (a load's dataset hashes, at the
 * offsets the layout predicts). Their hashes are of the bytes read; they
 * mean something only when the call succeeds. */
int rc_read_shard_verified(const char *path, const rc_mf_shard *entry, int threads,
                           unsigned char *dst, const rc_read_follow *follow, rc_shard_image *out,
                           rc_err *err);

/* ---- h5_util.c: file images, /meta, datasets ---- */

/* Opens an in-memory file image read-only without copying it. `ref` must
 * outlive the returned file id (HDF5 calls back into it until H5Fclose). */
typedef struct {
  const void *buf;
  size_t size;
} rc_h5_image_ref;
/* Opens an in-memory shard image read-only (no copy). Checks first that its
 * HDF5 structure is what shard_write.c produces, every length inside the
 * image (rc_check_shard_structure): libhdf5 allocates forged lengths
 * before it reads. Exit 65 on a structure it refuses. */
int rc_h5_open_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err);
/* The same without the structure check: any HDF5 file, for `inspect`,
 * which also reads files other programs wrote. */
int rc_h5_open_any_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err);

/* /meta as read from a shard; strings malloc'd. */
typedef struct {
  char *format;
  int64_t format_version, rank, world_size, iteration;
  char *config;
  char *config_sha256;
} rc_meta_read;
/* RC_EXIT_DATAERR when /meta or one of its attributes is missing or mistyped. */
int rc_h5_read_meta(hid_t fid, const char *what, rc_meta_read *m, rc_err *err);
void rc_meta_read_free(rc_meta_read *m);

/* Every dataset's absolute path, sorted by strcmp; *paths malloc'd (free with
 * rc_h5_free_paths). */
int rc_h5_list_datasets(hid_t fid, const char *what, char ***paths, int *n, rc_err *err);
void rc_h5_free_paths(char **paths, int n);

/* ---- shard_structure.c ---- */

/* The image's HDF5 structure is what shard_write.c produces, every length
 * inside the image (why: shard_structure.c). RC_OK, or RC_EXIT_DATAERR
 * naming the part (RC_EXIT_SOFTWARE when out of memory). */
int rc_check_shard_structure(const rc_h5_image_ref *ref, const char *what, rc_err *err);

#endif
