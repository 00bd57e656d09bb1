/* cuda_memory.cu — the CUDA backend's process state and memory ops.
 *
 * The one piece of process state is the context: the stream every op runs
 * on, the cuBLASLt handle, the fixed GEMM workspace and the scratch slots.
 * It is created lazily on first use (C++ guarantees a function-local static
 * is initialised exactly once) and torn down at exit, so that
 * compute-sanitizer's leak check sees every allocation returned and a real
 * leak stands out. Nothing in it influences results except the workspace
 * size, which is fixed. */
#include <string.h>

#include "base/host_pages.h"
#include "cuda_common.cuh"

/* Small uploads go through this many pinned slots of this size
 * (rc_cuda_to_device). */
#define RC_UPLOAD_SLOTS 16
#define RC_UPLOAD_SLOT_BYTES ((size_t)256 << 10)

/* 32 MiB is what NVIDIA recommends for cuBLASLt on Hopper. It is fixed: the
 * algorithm chosen for a GEMM shape may depend on it. */
#define RC_GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct {
  cudaStream_t stream;
  cublasLtHandle_t lt;
  void *workspace;
  void *scratch[RC_SCRATCH_COUNT];
  size_t scratch_bytes[RC_SCRATCH_COUNT];
  uint64_t scratch_key[RC_SCRATCH_COUNT][2]; /* rc_cuda_scratch_keyed's contents, */
  bool scratch_keyed[RC_SCRATCH_COUNT];      /* valid while set */
  /* two pinned bounce buffers for large host copies (created on first use) */
  void *bounce[2];
  cudaEvent_t bounce_free[2];
  /* pinned slots for small uploads, used in turn (created on first use) */
  void *upload;
  cudaEvent_t upload_done[RC_UPLOAD_SLOTS];
  int upload_next;
  /* the profiler's timer marks (ops.h timer_mark), created on first use */
  cudaEvent_t marks[RC_TIMER_SLOTS];
  bool mark_made[RC_TIMER_SLOTS];
} rc_cuda_ctx;

static void ctx_destroy(void);

static rc_cuda_ctx *ctx_create(void) {
  rc_cuda_ctx *c = (rc_cuda_ctx *)calloc(1, sizeof *c);
  if (!c) {
    fprintf(stderr, "resumecheck: out of host memory creating the CUDA context\n");
    abort();
  }
  /* A blocking stream: it still orders itself against the legacy default
   * stream, so code outside the backend that uses stream 0 (or NCCL after
   * ops->sync) cannot race it. */
  CUDA_CHECK(cudaStreamCreate(&c->stream));
  CUBLAS_CHECK(cublasLtCreate(&c->lt));
  CUDA_CHECK(cudaMalloc(&c->workspace, RC_GEMM_WORKSPACE_BYTES));
  /* Registered after the runtime's own exit handler (installed by the calls
   * above), so it runs first, while the runtime still works. */
  atexit(ctx_destroy);
  return c;
}

static rc_cuda_ctx *ctx(void) {
  static rc_cuda_ctx *c = ctx_create();
  return c;
}

/* Runs from atexit, after main returns or exit() is called. Return codes are
 * ignored on purpose: an error path may exit with a sticky CUDA error, and
 * teardown must not turn that exit into an abort. */
static void ctx_destroy(void) {
  rc_cuda_ctx *c = ctx();
  for (int slot = 0; slot < RC_SCRATCH_COUNT; slot++) (void)cudaFree(c->scratch[slot]);
  for (int b = 0; b < 2 && c->bounce[b]; b++) {
    (void)cudaFreeHost(c->bounce[b]);
    (void)cudaEventDestroy(c->bounce_free[b]);
  }
  if (c->upload) {
    (void)cudaFreeHost(c->upload);
    for (int k = 0; k < RC_UPLOAD_SLOTS; k++) (void)cudaEventDestroy(c->upload_done[k]);
  }
  for (int m = 0; m < RC_TIMER_SLOTS; m++)
    if (c->mark_made[m]) (void)cudaEventDestroy(c->marks[m]);
  (void)cudaFree(c->workspace);
  (void)cublasLtDestroy(c->lt);
  (void)cudaStreamDestroy(c->stream);
  free(c);
}

cudaStream_t rc_cuda_stream(void) {
  return ctx()->stream;
}
cublasLtHandle_t rc_cuda_lt(void) {
  return ctx()->lt;
}

void *rc_cuda_gemm_workspace(size_t *bytes) {
  *bytes = RC_GEMM_WORKSPACE_BYTES;
  return ctx()->workspace;
}

void *rc_cuda_scratch(int slot, size_t bytes) {
  rc_cuda_ctx *c = ctx();
  if (bytes == 0) bytes = 16;
  if (bytes > c->scratch_bytes[slot]) {
    /* Grow geometrically so a sequence of slightly larger requests does not
     * reallocate each time. cudaFree waits for the device, so no kernel still
     * reads the old buffer. */
    size_t want = c->scratch_bytes[slot] * 2;
    if (want < bytes) want = bytes;
    want = (want + 255) & ~(size_t)255;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (c->scratch[slot]) CUDA_CHECK(cudaFree(c->scratch[slot]));
    c->scratch[slot] = NULL;
    cudaError_t err = cudaMalloc(&c->scratch[slot], want);
    if (err != cudaSuccess) {
      fprintf(stderr, "resumecheck: cannot allocate %zu bytes of CUDA scratch: %s\n", want,
              cudaGetErrorString(err));
      abort();
    }
    c->scratch_bytes[slot] = want;
    c->scratch_keyed[slot] = false;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("RC_CUDA_SCRATCH_LOG"))
      fprintf(stderr, "resumecheck: scratch slot %d grows to %zu bytes (%.3f ms)\n", slot, want,
              1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
  }
  return c->scratch[slot];
}

void *rc_cuda_scratch_keyed(int slot, size_t bytes, const uint64_t key[2], bool *stale) {
  rc_cuda_ctx *c = ctx();
  void *p = rc_cuda_scratch(slot, bytes);
  *stale = !c->scratch_keyed[slot] || c->scratch_key[slot][0] != key[0] ||
           c->scratch_key[slot][1] != key[1];
  c->scratch_key[slot][0] = key[0];
  c->scratch_key[slot][1] = key[1];
  c->scratch_keyed[slot] = true;
  return p;
}

void rc_cuda_read_back(void *dst_host, const void *src, size_t bytes) {
  cudaStream_t s = rc_cuda_stream();
  CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
}

/* NULL when cudaMalloc fails (ops.h alloc): the caller names the buffer and
 * ends the leg with exit 75. The failed call's error is cleared so that the
 * context stays usable for the caller's cleanup. */
void *rc_cuda_alloc(size_t bytes) {
  /* A zero-byte request still gets a distinct, freeable pointer. */
  size_t want = bytes ? bytes : 4;
  void *p = NULL;
  if (cudaMalloc(&p, want) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  /* Zero-filled on the backend's stream: later ops on the stream see it. */
  CUDA_CHECK(cudaMemsetAsync(p, 0, want, rc_cuda_stream()));
  return p;
}

/* ops.h alloc_failed: the CUDA ops' own scratch (rc_cuda_scratch) still
 * ends the process when it cannot be had, so no failure ever waits here. */
int rc_cuda_alloc_failed(size_t *bytes, char *what, size_t cap) {
  (void)bytes, (void)what, (void)cap;
  return 0;
}

void rc_cuda_free(void *ptr) {
  if (!ptr) return;
  /* cudaFree synchronises with the device, so pending work on ptr finishes. */
  CUDA_CHECK(cudaFree(ptr));
}

/* Large copies between pageable host memory and the device go through two
 * pinned buffers, double-buffered: the host's memcpy of one chunk overlaps
 * the DMA of the other. Pageable copies are staged by the driver one small
 * piece at a time (about 1 GB/s device-to-host measured on the H200 host,
 * bench/NOTES.md); bytes are bytes either way. */
#define RC_BOUNCE_BYTES ((size_t)16 << 20)

static rc_cuda_ctx *bounce_ctx(void) {
  rc_cuda_ctx *c = ctx();
  for (int b = 0; b < 2 && !c->bounce[b]; b++) {
    CUDA_CHECK(cudaHostAlloc(&c->bounce[b], RC_BOUNCE_BYTES, cudaHostAllocDefault));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->bounce_free[b], cudaEventDisableTiming));
  }
  return c;
}

static void to_device_bounced(char *dst, const char *src, size_t bytes) {
  rc_cuda_ctx *c = bounce_ctx();
  for (size_t off = 0, k = 0; off < bytes; off += RC_BOUNCE_BYTES, k++) {
    size_t n = bytes - off < RC_BOUNCE_BYTES ? bytes - off : RC_BOUNCE_BYTES;
    int b = (int)(k & 1);
    CUDA_CHECK(cudaEventSynchronize(c->bounce_free[b])); /* its last DMA is done */
    memcpy(c->bounce[b], src + off, n);
    CUDA_CHECK(cudaMemcpyAsync(dst + off, c->bounce[b], n, cudaMemcpyHostToDevice, c->stream));
    CUDA_CHECK(cudaEventRecord(c->bounce_free[b], c->stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

static void to_host_bounced(char *dst, const char *src, size_t bytes) {
  rc_cuda_ctx *c = bounce_ctx();
  size_t n0 = bytes < RC_BOUNCE_BYTES ? bytes : RC_BOUNCE_BYTES;
  CUDA_CHECK(cudaMemcpyAsync(c->bounce[0], src, n0, cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaEventRecord(c->bounce_free[0], c->stream));
  for (size_t off = 0, k = 0; off < bytes; off += RC_BOUNCE_BYTES, k++) {
    size_t n = bytes - off < RC_BOUNCE_BYTES ? bytes - off : RC_BOUNCE_BYTES;
    size_t next = off + n;
    int b = (int)(k & 1);
    if (next < bytes) { /* the other buffer's chunk was copied out last round */
      size_t nn = bytes - next < RC_BOUNCE_BYTES ? bytes - next : RC_BOUNCE_BYTES;
      CUDA_CHECK(
          cudaMemcpyAsync(c->bounce[b ^ 1], src + next, nn, cudaMemcpyDeviceToHost, c->stream));
      CUDA_CHECK(cudaEventRecord(c->bounce_free[b ^ 1], c->stream));
    }
    CUDA_CHECK(cudaEventSynchronize(c->bounce_free[b]));
    memcpy(dst + off, c->bounce[b], n);
  }
}

/* Whether host memory is page-locked (rc_cuda_host_alloc): then the DMA
 * reads or writes it directly and a bounce copy would only cost time. */
static bool is_pinned(const void *host) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, host) != cudaSuccess) {
    cudaGetLastError(); /* ordinary memory may report an error: clear it */
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

/* Page-locked memory is an anonymous mapping on 2 MiB pages (host_pages.h),
 * faulted in here and then registered with the driver, not cudaHostAlloc:
 * for a 2.5 GB staging buffer on the H200 host, cudaHostAlloc took 0.84-1.04 s
 * and cudaFreeHost 0.23-0.49 s, registering the faulted-in huge pages
 * 0.05-0.09 s and unregistering them 0.04 s, with the same 55 GB/s copies
 * (bench/bench_pin.cu, bench/NOTES.md session 11). The fault-in (0.3-0.5 s,
 * zeroing) is CPU work on the caller's thread, no CUDA call waits for it. */
void *rc_cuda_host_alloc(size_t bytes, int page_locked) {
  char *p = (char *)rc_host_pages_alloc(bytes);
  if (!p || !page_locked) return p;
  size_t len = rc_host_pages_len(bytes);
  for (size_t i = 0; i < len; i += 4096) p[i] = 0; /* fault in: register pins what is there */
  /* portable: page-locked for every context, whichever thread asks */
  if (cudaHostRegister(p, len, cudaHostRegisterPortable) != cudaSuccess)
    cudaGetLastError(); /* e.g. a locked-memory limit: ordinary pages will do, slower */
  return p;
}

void rc_cuda_host_free(void *ptr, size_t bytes) {
  if (!ptr) return;
  if (is_pinned(ptr)) (void)cudaHostUnregister(ptr);
  rc_host_pages_free(ptr, bytes);
}

/* A small upload (the microbatch's ids and labels, the heads' loss
 * weights, an MoE layer's aux gradient: up to RC_UPLOAD_SLOT_BYTES) is
 * copied into the next pinned slot and DMA'd from there without waiting:
 * the caller may reuse its buffer at once, and the copy is ordered on the
 * stream before every later op. A synchronising copy drains the stream —
 * the GPU idles from the end of the queued work until the host's next
 * launch arrives — and there were about eight a microbatch. A slot is
 * written again only once its previous DMA is done (its event; one never
 * recorded counts as done). */
static void to_device_staged(void *dst, const void *src_host, size_t bytes) {
  rc_cuda_ctx *c = ctx();
  if (!c->upload) {
    CUDA_CHECK(
        cudaHostAlloc(&c->upload, RC_UPLOAD_SLOTS * RC_UPLOAD_SLOT_BYTES, cudaHostAllocDefault));
    for (int k = 0; k < RC_UPLOAD_SLOTS; k++)
      CUDA_CHECK(cudaEventCreateWithFlags(&c->upload_done[k], cudaEventDisableTiming));
  }
  const int k = c->upload_next;
  c->upload_next = (k + 1) % RC_UPLOAD_SLOTS;
  char *slot = (char *)c->upload + (size_t)k * RC_UPLOAD_SLOT_BYTES;
  CUDA_CHECK(cudaEventSynchronize(c->upload_done[k]));
  memcpy(slot, src_host, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, c->stream));
  CUDA_CHECK(cudaEventRecord(c->upload_done[k], c->stream));
}

void rc_cuda_to_device(void *dst, const void *src_host, size_t bytes) {
  if (bytes == 0) return;
  if (bytes >= 2 * RC_BOUNCE_BYTES && !is_pinned(src_host)) {
    to_device_bounced((char *)dst, (const char *)src_host, bytes);
    return;
  }
  if (bytes <= RC_UPLOAD_SLOT_BYTES && !is_pinned(src_host)) {
    to_device_staged(dst, src_host, bytes);
    return;
  }
  cudaStream_t s = rc_cuda_stream();
  CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, s));
  /* The caller may reuse its host buffer as soon as we return. */
  CUDA_CHECK(cudaStreamSynchronize(s));
}

void rc_cuda_to_host(void *dst_host, const void *src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes >= 2 * RC_BOUNCE_BYTES && !is_pinned(dst_host)) {
    to_host_bounced((char *)dst_host, (const char *)src, bytes);
    return;
  }
  rc_cuda_read_back(dst_host, src, bytes);
}

void rc_cuda_copy(void *dst, const void *src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rc_cuda_stream()));
}

void rc_cuda_zero(void *dst, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, rc_cuda_stream()));
}

/* zero_many: one launch for every buffer. Segment i takes blocks first ..
 * first + blocks - 1 (rc_block_segment), each ZERO_CHUNK bytes of it, 16 bytes
 * a store where the segment is 16-byte aligned (every allocation is), bytes
 * a store for the tail. The table goes up through a pinned upload slot (no
 * drain). */
#define ZERO_THREADS 256
#define ZERO_CHUNK ((size_t)ZERO_THREADS * 16 * 8) /* bytes a block: 8 stores a thread */

typedef struct {
  unsigned char *p;
  size_t n;
  int first, blocks;
} zero_segment;

__global__ void zero_many_kernel(const zero_segment *seg, int count) {
  __shared__ int which;
  if (threadIdx.x == 0) which = rc_block_segment(seg, count);
  __syncthreads();
  const zero_segment z = seg[which];
  const size_t b0 = (size_t)(blockIdx.x - z.first) * ZERO_CHUNK;
  const size_t b1 = b0 + ZERO_CHUNK < z.n ? b0 + ZERO_CHUNK : z.n;
  if (((uintptr_t)z.p & 15u) == 0) {
    const size_t v1 = b0 + (b1 - b0) / 16 * 16; /* whole 16-byte words of the chunk */
    for (size_t o = b0 + 16 * threadIdx.x; o < v1; o += 16 * ZERO_THREADS)
      *(uint4 *)(z.p + o) = make_uint4(0u, 0u, 0u, 0u);
    for (size_t o = v1 + threadIdx.x; o < b1; o += ZERO_THREADS) z.p[o] = 0;
  } else {
    for (size_t o = b0 + threadIdx.x; o < b1; o += ZERO_THREADS) z.p[o] = 0;
  }
}

void rc_cuda_zero_many(void *const *dst, const size_t *bytes, int count) {
  if (count <= 0) return;
  zero_segment *seg = (zero_segment *)malloc((size_t)count * sizeof *seg);
  if (!seg) {
    fprintf(stderr, "resumecheck: out of host memory in zero_many\n");
    abort();
  }
  int n = 0;
  size_t total = 0;
  for (int i = 0; i < count; i++) {
    if (bytes[i] == 0) continue;
    seg[n].p = (unsigned char *)dst[i];
    seg[n].n = bytes[i];
    seg[n].first = (int)total;
    seg[n].blocks = (int)((bytes[i] + ZERO_CHUNK - 1) / ZERO_CHUNK);
    total += (size_t)seg[n].blocks;
    n++;
  }
  if (n > 0) {
    zero_segment *dseg = (zero_segment *)rc_cuda_scratch(RC_SCRATCH_ZERO, (size_t)n * sizeof *seg);
    rc_cuda_to_device(dseg, seg, (size_t)n * sizeof *seg);
    zero_many_kernel<<<(unsigned int)total, ZERO_THREADS, 0, rc_cuda_stream()>>>(dseg, n);
    KERNEL_CHECK();
  }
  free(seg);
}

void rc_cuda_sync(void) {
  CUDA_CHECK(cudaStreamSynchronize(rc_cuda_stream()));
}

void rc_cuda_timer_mark(int slot) {
  if (slot < 0 || slot >= RC_TIMER_SLOTS) return;
  rc_cuda_ctx *c = ctx();
  if (!c->mark_made[slot]) {
    CUDA_CHECK(cudaEventCreate(&c->marks[slot]));
    c->mark_made[slot] = true;
  }
  CUDA_CHECK(cudaEventRecord(c->marks[slot], c->stream));
}

double rc_cuda_timer_seconds(int from, int to) {
  if (from < 0 || to < 0 || from >= RC_TIMER_SLOTS || to >= RC_TIMER_SLOTS) return 0.0;
  rc_cuda_ctx *c = ctx();
  if (!c->mark_made[from] || !c->mark_made[to]) return 0.0;
  CUDA_CHECK(cudaEventSynchronize(c->marks[to]));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, c->marks[from], c->marks[to]));
  return 1e-3 * (double)ms;
}

/* A trivial kernel whose attributes tell us whether this binary carries code
 * the device can run (sm_90 SASS, or PTX the driver can JIT). */
__global__ void rc_probe_kernel(int *x) {
  if (x) *x = 0;
}

int rc_cuda_device_usable(const char **why) {
  static char reason[512];
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    snprintf(reason, sizeof reason, "no usable CUDA device (%.200s)",
             err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    cudaGetLastError();
    if (why) *why = reason;
    return 0;
  }
  cudaFuncAttributes attr;
  err = cudaFuncGetAttributes(&attr, rc_probe_kernel);
  if (err != cudaSuccess) {
    int dev = 0;
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    snprintf(reason, sizeof reason,
             "the CUDA backend was not built for this GPU (%.200s, sm_%d%d): %.200s", prop.name,
             prop.major, prop.minor, cudaGetErrorString(err));
    cudaGetLastError();
    if (why) *why = reason;
    return 0;
  }
  return 1;
}
