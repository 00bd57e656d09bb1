/* compare_internal.h — what compare_files.c (paths, directories, manifests,
 * results) and compare_datasets.c (the HDF5 slow path) share. Not part of
 * the contract in compare.h. */
#ifndef RC_HARNESS_COMPARE_INTERNAL_H
#define RC_HARNESS_COMPARE_INTERNAL_H

#include <stdarg.h>

#include "harness/compare.h"
#include "io/manifest.h"

/* One comparison in progress: options, the result being filled and the
 * count of differences that --ignore suppressed. */
typedef struct {
  const rc_compare_opts *opts;
  rc_compare_result *res;
  int n_ignored;
} rc_cmp_ctx;

/* True when an --ignore pattern matches "file", "file:object" or (comparing
 * two files, file == "") the object alone. */
bool rc_cmp_ignored(const rc_cmp_ctx *c, const char *file, const char *object);

/* Records a difference unless ignored; returns it (for the caller to fill in
 * the numbers) or NULL when ignored. Aborts on out-of-memory, like the other
 * growing arrays of this project. */
rc_diff *rc_cmp_add(rc_cmp_ctx *c, rc_diff_kind kind, const char *file, const char *object,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* ---- compare_torch.c: PyTorch checkpoints, compared by content ---- */

/* A torch.distributed.checkpoint directory: it has a .metadata (in any
 * form: one that is not a regular file is refused by the reader). */
bool rc_cmp_is_dcp_dir(const char *dir);
/* .metadata or a *.distcp file: part of a DCP directory's unit. */
bool rc_cmp_is_dcp_member(const char *name);
/* A torch.save file: a .pt/.pth/.bin/.ckpt name holding a zip or a pickle. */
bool rc_cmp_is_torch_save(const char *name, const unsigned char *data, size_t size);
/* pa and pb (two DCP directories when dcp, else two torch.save files)
 * compared by `python3 -m resumecheck compare-torch`; its differences are
 * added to c under rel (and the rank file each names), its counts to c's
 * result. Errors: the child's 65/66 as such, 64 when Python, torch or the
 * package is missing, 70 otherwise. */
int rc_cmp_torch(rc_cmp_ctx *c, const char *rel, const char *pa, const char *pb, bool dcp,
                 rc_err *err);

/* ---- compare_hashes.c: a shard pair where a side kept hashes only ---- */

/* One side of such a pair: its manifest entry (the io layer's strict
 * parse), whether that side is a hashes-only checkpoint, and, when it is
 * not, the shard file and whether it was verified against the entry. */
typedef struct {
  const rc_mf_shard *entry;
  bool hashes_only;
  const char *path; /* the shard file; NULL on a hashes-only side */
  bool verified;    /* its bytes were read and match entry (verify_shards) */
} rc_cmp_side;

/* Decides the pair by SHA-256 (docs/compare.md, "Hashes-only checkpoints"):
 * equal chunk lists of one size (the manifests', or a file side's bytes
 * hashed at the other side's chunk size) are byte-identical; otherwise
 * every dataset's hash, a file side's computed from its verified bytes
 * (never its manifest's, unless --trust-manifests), and each difference
 * is recorded as such (RC_DIFF_SHA256, "values not compared"). Equal
 * datasets without comparable chunks are an informational note that the
 * file's other bytes were not compared, never a byte-identical file. */
int rc_cmp_hashes_shard(rc_cmp_ctx *c, const char *file_rel, const rc_cmp_side side[2],
                        rc_err *err);

/* A manifest's per-dataset SHA-256 values for one shard, sorted by path. The
 * strings are borrowed from the parsed manifest. */
typedef struct {
  const char *path, *sha256;
} rc_cmp_dset_hash;
typedef struct {
  const rc_cmp_dset_hash *items;
  int n;
} rc_cmp_hashes;

/* A whole file mapped read-only (data NULL for an empty file). Mapping
 * instead of read() saves the copy out of the page cache, which is most of
 * the cost of comparing two cached shards. */
typedef struct {
  const unsigned char *data;
  size_t size;
} rc_cmp_map;
int rc_cmp_map_open(const char *path, rc_cmp_map *m, rc_err *err);
void rc_cmp_map_close(rc_cmp_map *m);

/* What the slow path may take as already known about two HDF5 files. */
typedef struct {
  const rc_cmp_hashes *ha, *hb; /* manifest SHA-256 per dataset, or NULL: a dataset both
                                   give the same hash is not read */
  const rc_cmp_map *ma, *mb;    /* the files mapped, or NULL: contiguous datasets are then
                                   compared in place instead of through H5Dread */
  int64_t equal_prefix;         /* the files' first equal_prefix bytes are known equal: a
                                   contiguous dataset at the same offset inside it is equal;
                                   INT64_MAX: the files are equal, no value is read */
} rc_cmp_known;

/* The slow path for two HDF5 files: every link both ways, object kinds,
 * dtypes, shapes, attributes, raw values. file_rel names the pair in the
 * diffs. Errors: RC_EXIT_DATAERR when a file cannot be parsed or read. */
int rc_cmp_hdf5(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                const rc_cmp_known *known, rc_err *err);

/* True when the file starts with the HDF5 signature (at byte 0 or at a
 * user-block boundary: 512, 1024, 2048, ...). */
bool rc_cmp_is_hdf5(const char *path);

/* ---------------------------------------------------------------------------
 * Element comparison, shared by the HDF5 slow path and the tensor files
 * (.npy, .npz, safetensors: compare_tensors.c), so that a dataset and a
 * tensor that differ the same way are described the same way. */

typedef enum {
  RC_EL_F32,
  RC_EL_F64,
  RC_EL_F16,  /* IEEE binary16 */
  RC_EL_BF16, /* bfloat16: the top half of a float32 */
  RC_EL_INT,
  RC_EL_UINT,
  RC_EL_STR,
  RC_EL_RAW
} rc_cmp_el_kind;

typedef struct {
  rc_cmp_el_kind kind;
  size_t size;
  bool swap; /* stored byte order is not the host's */
} rc_cmp_el_fmt;

bool rc_cmp_host_is_le(void);

/* Difference statistics of one dataset or tensor (see rc_diff). Start with
 * {0} and first_index -1. */
typedef struct {
  int64_t n_different, first_index;
  double max_abs, max_rel;
  double max_mag; /* the largest |value| of either side among the differing elements */
  double sum_sq;  /* the sum of (a-b)^2 over the differing float elements */
  uint64_t max_ulp;
  int64_t n_signed_zero, n_nan_payload, n_nan_mismatch;
  char first_a[96], first_b[96];
} rc_cmp_stats;

/* Adds n elements of a and b (stored bytes, format f), whose flat indices
 * start at base, to st. Blocks can be fed in order, one after another. */
void rc_cmp_scan(rc_cmp_stats *st, const rc_cmp_el_fmt *f, const unsigned char *a,
                 const unsigned char *b, size_t n, int64_t base);

/* Records a RC_DIFF_VALUES difference from st (st->n_different > 0):
 * "float32[4,4]: 1 of 16 elements differ, first at [1,2]: 1 vs nan(0x7fc00000);
 * 1 NaN on one side". dtname, shape ("[4,4]") and index ("[1,2]", the
 * position of st->first_index) are the caller's renderings. */
rc_diff *rc_cmp_add_values(rc_cmp_ctx *c, const char *file, const char *object, const char *dtname,
                           const char *shape, const char *index, int64_t n_elements,
                           const rc_cmp_el_fmt *f, const rc_cmp_stats *st);

/* ---------------------------------------------------------------------------
 * Files that are not HDF5. */

/* Two files compared as bytes, streaming (read in chunks, both at once, from
 * byte `from`, which the caller knows to be where they start to differ, or
 * 0): fills d's byte fields (sizes, differing bytes over the common prefix,
 * ranges) and writes the detail. Errors: I/O (74). */
int rc_cmp_bytes_fill(const char *path_a, const char *path_b, int64_t from, rc_diff *d,
                      rc_err *err);

/* True for names this tool reads as tensor files: *.npy, *.npz,
 * *.safetensors. */
bool rc_cmp_is_tensor_name(const char *name);

/* Two tensor files of the same kind (by name), compared tensor by tensor:
 * presence, dtype, shape, values (rc_cmp_scan). ma / mb: both files, mapped.
 * *decoded: false when the files could not be decoded as tensors for a
 * reason that is not their fault (a dtype this tool does not read: the
 * caller then compares them as bytes, and *why says so). Errors: a
 * malformed header, truncated data, offsets outside the file or
 * overlapping: RC_EXIT_DATAERR naming the file and the problem. */
int rc_cmp_tensors(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                   const rc_cmp_map *ma, const rc_cmp_map *mb, bool *decoded, char *why,
                   size_t why_cap, rc_err *err);

#endif
