/* cuda_embedding.cu — token embedding lookup and its deterministic backward.
 *
 * The backward must add the gradient rows of repeated token ids in
 * increasing t (ops.h) without atomicAdd. It sorts the keys (id << 32 | t) —
 * unique, so the sorted order is fully determined and equals "by id, then by
 * t" — with a bitonic sort, then one block per distinct id walks its run of
 * sorted keys and adds the rows in order into the table, exactly the CPU's
 * loop per (id, column). The bitonic network is data-independent: the same
 * compare-exchanges run every time. */
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

/* ---- forward ----
 * A warp per row: lanes copy the table row a float4 at a time when rows are
 * 16-byte aligned (H % 4 == 0), else a float at a time. A flat index split
 * by H was a 64-bit division per element (ncu: 736 GB/s). */

#define EMB_WARPS 8 /* rows per block */

template <int VEC>
__global__ void embedding_forward_kernel(float *out, const int32_t *ids, const float *table, int T,
                                         int H) {
  const int t = blockIdx.x * EMB_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (t >= T) return;
  const float *src = table + (size_t)ids[t] * (size_t)H;
  float *dst = out + (size_t)t * (size_t)H;
  for (int h = VEC * lane; h < H; h += 32 * VEC) {
    rc_piece<VEC> p;
    p.load(src + h);
    p.store(dst + h);
  }
}

void rc_cuda_embedding_forward(float *out, const int32_t *ids, const float *table, int T, int H) {
  if (T <= 0 || H <= 0) return;
  const unsigned int blocks = rc_cdiv((size_t)T, EMB_WARPS);
  if (rc_rows_vec4(out, table, H))
    embedding_forward_kernel<4>
        <<<blocks, 32 * EMB_WARPS, 0, rc_cuda_stream()>>>(out, ids, table, T, H);
  else
    embedding_forward_kernel<1>
        <<<blocks, 32 * EMB_WARPS, 0, rc_cuda_stream()>>>(out, ids, table, T, H);
  KERNEL_CHECK();
}

/* ---- bitonic sort of uint64 keys (length a power of two >= SORT_CHUNK) ---- */

#define SORT_CHUNK 2048 /* keys per block in shared memory */
#define SORT_THREADS (SORT_CHUNK / 2)

__device__ __forceinline__ void cmp_swap(unsigned long long *a, unsigned long long *b, bool up) {
  unsigned long long x = *a, y = *b;
  if ((x > y) == up) {
    *a = y;
    *b = x;
  }
}

/* Runs, inside one chunk of SORT_CHUNK keys held in shared memory, the
 * bitonic steps for sizes k = k_first .. k_last (doubling) and, for each,
 * strides j from min(k/2, j_first) down to 1. Directions use the global
 * index, so chunks take part in the larger merges correctly. */
__global__ void bitonic_local_kernel(unsigned long long *keys, unsigned int k_first,
                                     unsigned int k_last, unsigned int j_first) {
  __shared__ unsigned long long sh[SORT_CHUNK];
  size_t base = (size_t)blockIdx.x * SORT_CHUNK;
  sh[threadIdx.x] = keys[base + threadIdx.x];
  sh[threadIdx.x + SORT_THREADS] = keys[base + threadIdx.x + SORT_THREADS];
  __syncthreads();
  for (unsigned int k = k_first; k <= k_last; k <<= 1) {
    unsigned int j = k / 2 < j_first ? k / 2 : j_first;
    for (; j > 0; j >>= 1) {
      /* thread t owns the pair (i, i + j) with bit j of i clear */
      unsigned int t = threadIdx.x;
      unsigned int i = 2 * j * (t / j) + (t % j);
      bool up = ((base + i) & k) == 0;
      cmp_swap(&sh[i], &sh[i + j], up);
      __syncthreads();
    }
  }
  keys[base + threadIdx.x] = sh[threadIdx.x];
  keys[base + threadIdx.x + SORT_THREADS] = sh[threadIdx.x + SORT_THREADS];
}

/* One step (k, j) across chunks, for j >= SORT_CHUNK. */
__global__ void bitonic_global_kernel(unsigned long long *keys, size_t n, size_t k, size_t j) {
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (t >= n / 2) return;
  size_t i = 2 * j * (t / j) + (t % j);
  bool up = (i & k) == 0;
  cmp_swap(&keys[i], &keys[i + j], up);
}

__global__ void make_keys_kernel(unsigned long long *keys, const int32_t *ids, int T, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    keys[i] = i < (size_t)T ? ((unsigned long long)(uint32_t)ids[i] << 32) | (unsigned long long)i
                            : ~0ull; /* padding sorts last */
}

static void bitonic_sort(unsigned long long *keys, size_t n) {
  cudaStream_t s = rc_cuda_stream();
  unsigned int chunks = (unsigned int)(n / SORT_CHUNK);
  /* every size up to a chunk, entirely in shared memory */
  bitonic_local_kernel<<<chunks, SORT_THREADS, 0, s>>>(keys, 2, SORT_CHUNK, SORT_CHUNK);
  KERNEL_CHECK();
  for (size_t k = 2 * SORT_CHUNK; k <= n; k <<= 1) {
    for (size_t j = k / 2; j >= SORT_CHUNK; j >>= 1) {
      bitonic_global_kernel<<<rc_cdiv(n / 2, 256), 256, 0, s>>>(keys, n, k, j);
      KERNEL_CHECK();
    }
    bitonic_local_kernel<<<chunks, SORT_THREADS, 0, s>>>(keys, (unsigned int)k, (unsigned int)k,
                                                         SORT_CHUNK / 2);
    KERNEL_CHECK();
  }
}

/* ---- backward: one block per run of equal ids in the sorted keys ----
 * The adds of a run form one dependent chain (increasing t, one rounding per
 * term, as on the CPU), so a frequent token is a long serial chain. What can
 * overlap are the loads: each thread fetches the next EMB_BATCH rows of its
 * column at once, then adds them in order. The sum is the same, bit for bit,
 * as adding them one at a time. */

#define EMB_BATCH 16

__device__ __forceinline__ unsigned int key_id(unsigned long long k) {
  return (unsigned int)(k >> 32);
}
__device__ __forceinline__ int key_row(unsigned long long k) {
  return (int)(k & 0xffffffffull);
}

/* Column h of id's table row plus the rows of its run from sorted key s on,
 * in increasing t, one rounding per term: BATCH rows' loads are issued
 * before their adds, which keeps the sum's bits. */
template <int BATCH>
__device__ __forceinline__ void add_run_column(float *dtable, const unsigned long long *keys,
                                               const float *dout, int s, unsigned int id, int T,
                                               int H, int h) {
  float acc = dtable[(size_t)id * H + h];
  for (int q = s;; q += BATCH) {
    float row[BATCH];
    int in_run = 0; /* keys are sorted, so the run is a prefix of the batch */
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      const int qb = q + b;
      const bool in = qb < T && key_id(keys[qb]) == id;
      row[b] = in ? dout[(size_t)key_row(keys[qb]) * H + h] : 0.0f;
      in_run += in;
    }
#pragma unroll
    for (int b = 0; b < BATCH; b++)
      if (b < in_run) acc += row[b];
    if (in_run < BATCH) break;
  }
  dtable[(size_t)id * H + h] = acc;
}

__global__ void embedding_backward_kernel(float *dtable, const unsigned long long *keys,
                                          const float *dout, int T, int H) {
  int i = blockIdx.x;
  unsigned int id = key_id(keys[i]);
  if (i > 0 && key_id(keys[i - 1]) == id) return; /* not the first of its run */
  for (int h = threadIdx.x; h < H; h += blockDim.x)
    add_run_column<EMB_BATCH>(dtable, keys, dout, i, id, T, H, h);
}

/* ---- backward, runs split by length (RC_CUDA_EMBEDDING=split) ----
 * The kernel above launches a block of H threads per sorted key, and all
 * but a run's first exit at once: at gpu-small (8192 keys, H 768) that is
 * 31 waves of blocks that load two keys and leave, and a frequent token's
 * run (the padding token's ~1000 rows) is a chain of 16-row batches, each
 * waiting two load latencies. Here a run of at most EMB_SHORT rows is one
 * warp's (a warp per key, eight to a block: one wave for every key), and the
 * longer runs are found by every block of a small persistent grid scanning
 * the keys (ballots, in key order) and dealt out among the blocks, each run
 * a column a thread with EMB_LONG_BATCH rows' loads in flight. Every
 * (id, column) is still one chain in increasing t, one rounding per term:
 * the same bits as the kernel above and the CPU. */

#define EMB_SHORT 32 /* the longest run a warp adds */
#define EMB_SHORT_WARPS 8
#define EMB_SHORT_BATCH 8 /* a warp's rows in flight per piece of columns */
#define EMB_LONG_THREADS 1024
#define EMB_LONG_BATCH 32

/* whether sorted key i starts a run longer than EMB_SHORT rows */
__device__ __forceinline__ bool starts_long_run(const unsigned long long *keys, int i, int T) {
  const unsigned int id = key_id(keys[i]);
  return (i == 0 || key_id(keys[i - 1]) != id) && i + EMB_SHORT < T &&
         key_id(keys[i + EMB_SHORT]) == id;
}

template <int VEC>
__global__ void __launch_bounds__(32 * EMB_SHORT_WARPS)
    embedding_backward_short_kernel(float *dtable, const unsigned long long *keys,
                                    const float *dout, int T, int H) {
  __shared__ int rows[EMB_SHORT_WARPS][32];
  const int w = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int i = blockIdx.x * EMB_SHORT_WARPS + w;
  if (i >= T) return; /* the warp's every lane: i is the warp's */
  const unsigned int id = key_id(keys[i]);
  if (i > 0 && key_id(keys[i - 1]) == id) return; /* not the first of its run */
  /* lane j: the run's (j+1)-th key, if the run has one (sorted: a prefix) */
  const int j = i + lane;
  const bool in = j < T && key_id(keys[j]) == id;
  const int len = __popc(__ballot_sync(0xffffffffu, in));
  if (len == 32 && i + EMB_SHORT < T && key_id(keys[i + EMB_SHORT]) == id) return; /* long */
  rows[w][lane] = in ? key_row(keys[j]) : 0;
  __syncwarp();
  float *dst = dtable + (size_t)id * (size_t)H;
  for (int h = VEC * lane; h < H; h += 32 * VEC) {
    rc_piece<VEC> acc;
    acc.load(dst + h);
    for (int r0 = 0; r0 < len; r0 += EMB_SHORT_BATCH) {
      rc_piece<VEC> x[EMB_SHORT_BATCH];
#pragma unroll
      for (int b = 0; b < EMB_SHORT_BATCH; b++)
        if (r0 + b < len) x[b].load(dout + (size_t)rows[w][r0 + b] * (size_t)H + h);
#pragma unroll
      for (int b = 0; b < EMB_SHORT_BATCH; b++) /* in increasing t */
        if (r0 + b < len)
          for (int e = 0; e < VEC; e++) acc.v[e] += x[b].v[e];
    }
    acc.store(dst + h);
  }
}

__global__ void __launch_bounds__(EMB_LONG_THREADS)
    embedding_backward_long_kernel(float *dtable, const unsigned long long *keys, const float *dout,
                                   int T, int H) {
  __shared__ unsigned int flags[EMB_LONG_THREADS / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  int ordinal = 0; /* long runs seen so far, in key order */
  for (int base = 0; base < T; base += EMB_LONG_THREADS) {
    const int i = base + tid;
    const unsigned int ballot = __ballot_sync(0xffffffffu, i < T && starts_long_run(keys, i, T));
    if (lane == 0) flags[warp] = ballot;
    __syncthreads();
    /* the chunk's long runs in key order: run number `ordinal` is block
     * ordinal % gridDim.x's */
    for (int wd = 0; wd < EMB_LONG_THREADS / 32; wd++) {
      for (unsigned int f = flags[wd]; f; f &= f - 1, ordinal++) {
        if (ordinal % (int)gridDim.x != (int)blockIdx.x) continue;
        const int s = base + wd * 32 + __ffs(f) - 1;
        const unsigned int id = key_id(keys[s]);
        for (int h = tid; h < H; h += EMB_LONG_THREADS)
          add_run_column<EMB_LONG_BATCH>(dtable, keys, dout, s, id, T, H, h);
      }
    }
    __syncthreads(); /* flags read by all before the next chunk's */
  }
}

/* RC_CUDA_EMBEDDING=split opts into the kernels above until they have been
 * checked and timed on a GPU (bench/NOTES.md, session 23); read once per
 * process and recorded as a kernel switch. */
static bool embedding_split_on(void) {
  static int on = -1;
  return rc_env_once(&on, "RC_CUDA_EMBEDDING", "split");
}

void rc_cuda_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                                int V) {
  (void)V;
  if (T <= 0 || H <= 0) return;
  size_t n = SORT_CHUNK;
  while (n < (size_t)T) n <<= 1;
  unsigned long long *keys =
      (unsigned long long *)rc_cuda_scratch(RC_SCRATCH_SORT, n * sizeof(unsigned long long));
  cudaStream_t s = rc_cuda_stream();
  make_keys_kernel<<<rc_grid_1d(n, 256), 256, 0, s>>>(keys, ids, T, n);
  KERNEL_CHECK();
  bitonic_sort(keys, n);
  if (embedding_split_on()) {
    const unsigned int blocks = rc_cdiv((size_t)T, EMB_SHORT_WARPS); /* a warp a key */
    if (rc_rows_vec4(dtable, dout, H))
      embedding_backward_short_kernel<4>
          <<<blocks, 32 * EMB_SHORT_WARPS, 0, s>>>(dtable, keys, dout, T, H);
    else
      embedding_backward_short_kernel<1>
          <<<blocks, 32 * EMB_SHORT_WARPS, 0, s>>>(dtable, keys, dout, T, H);
    KERNEL_CHECK();
    /* at most T / (EMB_SHORT + 1) long runs; two blocks an SM at most */
    const int most = T / (EMB_SHORT + 1), two_an_sm = 2 * rc_sm_count();
    const unsigned int grid = (unsigned int)(most < two_an_sm ? most : two_an_sm);
    if (grid > 0) {
      embedding_backward_long_kernel<<<grid, EMB_LONG_THREADS, 0, s>>>(dtable, keys, dout, T, H);
      KERNEL_CHECK();
    }
    return;
  }
  /* one thread per column up to 1024: every column's chain runs at once */
  int threads = H >= 1024 ? 1024 : ((H + 31) / 32) * 32;
  embedding_backward_kernel<<<T, threads, 0, s>>>(dtable, keys, dout, T, H);
  KERNEL_CHECK();
}
