/* shard_image.c — the memory a shard image lives in: the mapping both the
 * writer (the core driver's buffer, shard_write.c) and the reader (a file
 * read into memory, shard_verify.c) put it in, and freeing an image.
 *
 * Its own file so that neither side calls into the other for it. */
#include "io/checkpoint_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/host_pages.h"

/* 2 MiB-aligned so the kernel can back it with huge pages (base/host_pages.h). */
unsigned char *rc_map_image(size_t n, size_t *cap) {
  unsigned char *p = rc_host_pages_alloc(n);
  if (p) *cap = rc_host_pages_len(n);
  return p;
}

int rc_cmp_index_by_u64(const void *a, const void *b, void *keys) {
  const uint64_t *k = keys;
  int i = *(const int *)a, j = *(const int *)b;
  if (k[i] != k[j]) return k[i] < k[j] ? -1 : 1;
  return (i > j) - (i < j);
}

void rc_shard_image_free(rc_shard_image *image) {
  if (image->data && !image->borrowed) munmap(image->data, image->cap);
  free(image->pieces);
  free(image->offset);
  memset(image, 0, sizeof *image);
}
