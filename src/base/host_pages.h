/* host_pages.h — large host buffers straight from the kernel (anonymous
 * mapping: zero-filled, 2 MiB-aligned so it can be backed by huge pages,
 * returned to the system when freed): shard images (io) and checkpoint
 * staging (the CPU backend's host_alloc, and the CUDA backend's when
 * page-locked memory is not asked for or cannot be had). Header-only: the
 * CUDA module links nothing of the core. */
#ifndef RC_BASE_HOST_PAGES_H
#define RC_BASE_HOST_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#define RC_HOST_PAGES_ALIGN ((size_t)2 << 20)

static inline size_t rc_host_pages_len(size_t bytes) {
  size_t n = bytes ? bytes : 1;
  return (n + RC_HOST_PAGES_ALIGN - 1) & ~(RC_HOST_PAGES_ALIGN - 1);
}

static inline void *rc_host_pages_alloc(size_t bytes) {
  size_t len = rc_host_pages_len(bytes);
  char *raw = (char *)mmap(NULL, len + RC_HOST_PAGES_ALIGN, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uintptr_t a = ((uintptr_t)raw + RC_HOST_PAGES_ALIGN - 1) & ~(uintptr_t)(RC_HOST_PAGES_ALIGN - 1);
  char *p = (char *)a;
  if (p > raw) munmap(raw, (size_t)(p - raw));
  size_t tail = (size_t)(raw + len + RC_HOST_PAGES_ALIGN - (p + len));
  if (tail) munmap(p + len, tail);
#ifdef MADV_HUGEPAGE
  (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: fine if refused */
#endif
  return p;
}

/* The CPU backend's host_alloc: memory is memory there. */
static inline void *rc_host_pages_alloc_any(size_t bytes, int page_locked) {
  (void)page_locked;
  return rc_host_pages_alloc(bytes);
}

static inline void rc_host_pages_free(void *ptr, size_t bytes) {
  if (ptr) munmap(ptr, rc_host_pages_len(bytes));
}

#endif
