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
 * as adding them one at a time. (Four columns a thread with a batch's keys
 * loaded together was within 1% on the H200: measured in session 26,
 * bench/NOTES.md, removed in session 27.) */

#define EMB_BATCH 16

__device__ __forceinline__ unsigned int key_id(unsigned long long k) {
  return (unsigned int)(k >> 32);
}
__device__ __forceinline__ int key_row(unsigned long long k) {
  return (int)(k & 0xffffffffull);
}

/* Column h of id's table row plus the rows of its run from sorted key s on,
 * in increasing t, one rounding per term: EMB_BATCH rows' loads are issued
 * before their adds, which keeps the sum's bits. */
__device__ __forceinline__ void add_run_column(float *dtable, const unsigned long long *keys,
                                               const float *dout, int s, unsigned int id, int T,
                                               int H, int h) {
  float acc = dtable[(size_t)id * H + h];
  for (int q = s;; q += EMB_BATCH) {
    float row[EMB_BATCH];
    int in_run = 0; /* keys are sorted, so the run is a prefix of the batch */
#pragma unroll
    for (int b = 0; b < EMB_BATCH; b++) {
      const int qb = q + b;
      const bool in = qb < T && key_id(keys[qb]) == id;
      row[b] = in ? dout[(size_t)key_row(keys[qb]) * H + h] : 0.0f;
      in_run += in;
    }
#pragma unroll
    for (int b = 0; b < EMB_BATCH; b++)
      if (b < in_run) acc += row[b];
    if (in_run < EMB_BATCH) break;
  }
  dtable[(size_t)id * H + h] = acc;
}

/* EMB_LONG_RUNS=1 (a variant build until a GPU has measured it, bench/variants.spec): runs of
 * more than EMB_LONG rows go to embedding_backward_long_kernel below, the rest stay here. */
#ifndef EMB_LONG_RUNS
#define EMB_LONG_RUNS 0
#endif
#define EMB_LONG 64

/* A block per run (a block per sorted key; all but each run's first return
 * at once); with EMB_LONG_RUNS, only the runs of at most EMB_LONG rows. */
__global__ void embedding_backward_kernel(float *dtable, const unsigned long long *keys,
                                          const float *dout, int T, int H) {
  int i = blockIdx.x;
  unsigned int id = key_id(keys[i]);
  if (i > 0 && key_id(keys[i - 1]) == id) return; /* not the first of its run */
  if (EMB_LONG_RUNS && i + EMB_LONG < T && key_id(keys[i + EMB_LONG]) == id) return; /* long */
  for (int h = threadIdx.x; h < H; h += blockDim.x)
    add_run_column(dtable, keys, dout, i, id, T, H, h);
}

/* ---- backward of the long runs (more than EMB_LONG rows) ----
 * The kernel above walks a run with one thread a column, sixteen rows' keys,
 * then their rows, a batch: two dependent round trips to memory per sixteen
 * rows. gpu-small's documents are padded with token 0, about a thousand
 * times in each microbatch's 8192 tokens: ~60 batches in a row for that
 * run's block, which by this count alone is ~0.1 ms of the 0.15 ms the
 * kernel takes (Nsight Compute, session 25, whose SM throughput of 28%
 * fits most SMs idling behind one block). Session 23's long-run kernel (32
 * rows in flight) and session 26's four columns a thread each kept a
 * run's chain of batches about as long, and neither moved the time. Here a
 * long run is spread over its columns: block (b, y) takes the run whose
 * first multiple of EMB_LONG is b * EMB_LONG (every run longer than
 * EMB_LONG has one; shorter runs and a long run's later multiples return at
 * once, with no list to build), and its warp w the 32 columns from
 * 32 (EMB_LONG_WARPS y + w). A warp holds EMB_CHUNK rows' keys, two a lane,
 * issues all the chunk's row loads before adding them and the next chunk's
 * key loads with them: one round trip per EMB_CHUNK rows, for each of the
 * run's H / 32 warps at once (~16 for the padding run where the kernel above
 * makes ~120). Each column is still table + rows in increasing t, one
 * rounding per term: the same bits as the kernel above and as the CPU. */
#define EMB_CHUNK 64 /* rows a warp has in flight: two keys a lane */
#define EMB_LONG_WARPS 4

__global__ void __launch_bounds__(32 * EMB_LONG_WARPS)
    embedding_backward_long_kernel(float *dtable, const unsigned long long *keys, const float *dout,
                                   int T, int H) {
  static_assert(EMB_CHUNK == 64 && EMB_LONG == 64, "two keys a lane; a run's first multiple is "
                                                   "found among the EMB_LONG keys before it");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int q = blockIdx.x * EMB_LONG;
  const unsigned int id = key_id(keys[q]);
  if (q >= EMB_LONG && key_id(keys[q - EMB_LONG]) == id) return; /* not the run's first multiple */
  /* the run's first key: among q - 63 .. q (it cannot start earlier) */
  const int from = q >= EMB_LONG ? q - EMB_LONG + 1 : 0;
  const bool in0 = key_id(keys[from + lane]) == id,
             in1 = from + 32 + lane <= q && key_id(keys[from + 32 + lane]) == id;
  const unsigned int b0 = __ballot_sync(0xffffffffu, in0), b1 = __ballot_sync(0xffffffffu, in1);
  const int s = b0 ? from + __ffs(b0) - 1 : from + 32 + __ffs(b1) - 1;
  if (s + EMB_LONG >= T || key_id(keys[s + EMB_LONG]) != id) return; /* a short run */
  const int col = 32 * (EMB_LONG_WARPS * blockIdx.y + warp) + lane;
  const bool live = col < H;
  float acc = live ? dtable[(size_t)id * H + col] : 0.0f;
  /* this chunk's keys, two a lane: rows q0 + lane and q0 + 32 + lane */
  int q0 = s;
  unsigned long long k0 = q0 + lane < T ? keys[q0 + lane] : ~0ull;
  unsigned long long k1 = q0 + 32 + lane < T ? keys[q0 + 32 + lane] : ~0ull;
  for (;;) {
    /* the chunk's rows in the run: a prefix (keys are sorted; ~0 is no token's id) */
    const int n = __popc(__ballot_sync(0xffffffffu, key_id(k0) == id)) +
                  __popc(__ballot_sync(0xffffffffu, key_id(k1) == id));
    const int q1 = q0 + EMB_CHUNK; /* the next chunk's keys, loaded while this one's rows are */
    const unsigned long long n0 = n == EMB_CHUNK && q1 + lane < T ? keys[q1 + lane] : ~0ull;
    const unsigned long long n1 =
        n == EMB_CHUNK && q1 + 32 + lane < T ? keys[q1 + 32 + lane] : ~0ull;
    const int r0 = key_row(k0), r1 = key_row(k1);
    float v[EMB_CHUNK];
#pragma unroll
    for (int b = 0; b < EMB_CHUNK; b++) {
      const int row = __shfl_sync(0xffffffffu, b < 32 ? r0 : r1, b % 32);
      v[b] = live && b < n ? dout[(size_t)row * H + col] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < EMB_CHUNK; b++)
      if (b < n) acc += v[b];
    if (n < EMB_CHUNK) break;
    q0 = q1, k0 = n0, k1 = n1;
  }
  if (live) dtable[(size_t)id * H + col] = acc;
}

/* RC_CUDA_SUM_ORDER=atomic (a kernel switch: not deterministic on purpose,
 * the GPU's test bench of `run --noise calibrated`, docs/design.md §7.2):
 * every token's row added into its id's row by atomicAdd, in whatever order
 * the blocks happen to run, as PyTorch's embedding backward and index_add_
 * do on CUDA. A repeated id's sum then changes its last bits run to run. */
__global__ void embedding_backward_atomic_kernel(float *dtable, const int32_t *ids,
                                                 const float *dout, int T, int H) {
  const int t = blockIdx.x;
  const size_t row = (size_t)(uint32_t)ids[t] * H;
  for (int h = threadIdx.x; h < H; h += blockDim.x)
    atomicAdd(&dtable[row + h], dout[(size_t)t * H + h]);
}

static bool sum_order_atomic(void) {
  static int v = -1;
  return rc_env_once(&v, "RC_CUDA_SUM_ORDER", "atomic");
}

void rc_cuda_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                                int V) {
  (void)V;
  if (T <= 0 || H <= 0) return;
  if (sum_order_atomic()) {
    embedding_backward_atomic_kernel<<<T, H >= 256 ? 256 : ((H + 31) / 32) * 32, 0,
                                       rc_cuda_stream()>>>(dtable, ids, dout, T, H);
    KERNEL_CHECK();
    return;
  }
  size_t n = SORT_CHUNK;
  while (n < (size_t)T) n <<= 1;
  unsigned long long *keys =
      (unsigned long long *)rc_cuda_scratch(RC_SCRATCH_SORT, n * sizeof(unsigned long long));
  cudaStream_t s = rc_cuda_stream();
  make_keys_kernel<<<rc_grid_1d(n, 256), 256, 0, s>>>(keys, ids, T, n);
  KERNEL_CHECK();
  bitonic_sort(keys, n);
  if (EMB_LONG_RUNS) { /* the long runs first (few of its blocks do anything) */
    const dim3 long_grid(rc_cdiv((size_t)T, EMB_LONG), rc_cdiv((size_t)H, 32 * EMB_LONG_WARPS));
    embedding_backward_long_kernel<<<long_grid, 32 * EMB_LONG_WARPS, 0, s>>>(dtable, keys, dout, T,
                                                                             H);
    KERNEL_CHECK();
  }
  /* one thread per column up to 1024: every column's chain runs at once */
  int threads = H >= 1024 ? 1024 : ((H + 31) / 32) * 32;
  embedding_backward_kernel<<<T, threads, 0, s>>>(dtable, keys, dout, T, H);
  KERNEL_CHECK();
}
