/* cuda_attention_bf16.cu — causal attention under ops.h's BF16 contract, on
 * tensor cores: mma.sync m16n8k16 (bf16 x bf16 -> fp32), the FlashAttention-2
 * structure with scores and probabilities kept in registers.
 *
 * The fp32 kernels (cuda_attention.cu) spend their time in CUDA-core
 * arithmetic; PyTorch's SDPA, the peer of the gpu-small benchmark, runs bf16
 * products on tensor cores. This file gives resumecheck the same numerics
 * class, selected explicitly (--attention-precision bf16), never silently.
 *
 * Why mma.sync and not WMMA: WMMA's accumulator layout is opaque, so every
 * score tile had to round-trip through shared memory for the softmax (the
 * previous version of this file, 8.7x slower than SDPA's forward). The PTX
 * fragment layouts are documented, so a score tile's accumulator registers
 * are reused directly as the A operand of P V (FlashAttention-2's trick).
 *
 * Rounding, as ops.h names it: q, k, v and dout are rounded to bf16 once per
 * call (round to nearest even, rc_round_bf16's rule) into [B][nh][S][hd]
 * blocks, which the kernels stream into shared memory with cp.async, two
 * stages deep. P is rounded to bf16 before P V and P^T dO, dS before dS K and
 * dS^T Q; everything accumulates in fp32; max, sum, lse and D stay fp32.
 *
 * Exponentials are base 2, FlashAttention's way: scores are scaled by
 * scale * log2(e) (and lse by log2(e) in the backward), so each probability
 * is one multiply-add and one ex2 instead of expf's range reduction (forward
 * 0.156 -> 0.139 ms, backward 0.423 -> 0.405 at gpu-small on the H200). The
 * values differ from the CPU's expf by an ulp or two before the bf16
 * rounding of P, inside the tolerance cuda_ops holds this contract to.
 *
 * Determinism: each MMA folds its products in the hardware's fixed order;
 * every accumulator is a fixed sequence of MMAs (key or query tiles in
 * increasing order, k-steps in increasing order); row statistics reduce over
 * a quad with a fixed xor-shuffle tree; there are no atomics; the one split
 * reduction (dQ over key blocks, below) is summed in a fixed order; each
 * output element is written by exactly one thread.
 *
 * Tiles are 64 x 64, each warp owning 16 rows of a tile (query rows in the
 * forward, key rows in dK/dV; for dQ's share 16 query rows and half the
 * columns).
 *  forward  per (128 query rows, head, batch), 8 warps: online softmax over
 *           the key tiles up to the diagonal, P = exp(s - running max);
 *           out = O / l.
 *  backward D = rowsum(bf16(dout) * bf16(out)) first, in the pass that rounds
 *           dout into heads (q, k, v come rounded from RoPE's pass when
 *           the caller kept its heads); then one kernel per block of 128
 *           keys (8 warps) looping over the query tiles that meet it:
 *           P = exp(s - lse) and dS recomputed once, dK and dV accumulated
 *           in registers, and dQ's share of the pair, dS K, written as a
 *           partial per (query tile, key block); a last kernel sums each
 *           query's partials in increasing key block (fixed order, no
 *           atomics). Until session 13 a second kernel recomputed S and dP
 *           per query tile for dQ; until session 17 key blocks were 64 keys
 *           (4 warps, twice the partials). Session 17 also measured summing
 *           the shares in place, a chain of key tiles ordered by flags (in
 *           the compute warps, then in a fifth warp): 0.369 and 0.746 ms a
 *           call against the partials' 0.339 (bench/NOTES.md). For a half
 *           qkv linear (ops.h dqkv_half) the dK/dV stores and the dQ sum
 *           apply RoPE's backward and write the 16-bit gradient the linear
 *           reads: no fp32 dqkv, no rope_backward pass (session 18).
 *
 * Head dims: multiples of 16 up to 128 (the config enforces it). HD is the
 * template bound; columns hd..HD-1 of every shared tile are zero, so a
 * smaller hd runs the HD kernel unchanged (its extra products add zeros).
 *
 * On Hopper (sm_90a code loaded, hd <= 64) the forward and the dK/dV kernel
 * are cuda_attention_wgmma.cu's, with this file's rounding pass, partials
 * and reduction; the helpers both share are in cuda_attention_bf16.cuh. */
#include "cuda_attention_bf16.cuh"

/* ---- forward ---- */

/* Query rows a forward block owns: 16 per warp. Eight warps share each K
 * and V tile they stage (four did until session 17: half the tile traffic
 * from L2 per product and half the blocks, for 2% of the forward; the
 * results are bitwise those of four). */
#define AF_WARPS 8
#define AF_THREADS (AF_WARPS * 32)
#define AF_BQ (AF_WARPS * 16)

/* One block per (query block of AF_BQ rows, head, batch), warp w owning rows
 * 16w..16w+15; key tiles of 64 up to the block's last row. A warp's rows see
 * the same key tiles, in the same order, with the same masking as with any
 * other block height: a tile wholly after its rows is skipped (it would add
 * exp(-inf) = 0 and rescale by 1), so the block height never changes a bit. */
template <int HD>
__global__ void __launch_bounds__(AF_THREADS, HD <= 64 ? 2 : 1) /* two blocks an SM at hd <= 64 */
    attention_bf16_forward_kernel(float *out, float *lse, const bf16 *qh, const bf16 *kh,
                                  const bf16 *vh, int S, int nh, int hd, float scale,
                                  uint16_t *out_half, int fp16) {
  constexpr int LDS = HD + 8, TILE = 64 * LDS, QTILES = AF_BQ / 64;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *Qs = (bf16 *)smem, *Ks = Qs + QTILES * TILE, *Vs = Ks + 2 * TILE; /* K, V: two stages */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int qb = gridDim.x - 1 - blockIdx.x;       /* the longest rows start first */
  const float scale_log2 = scale * (float)M_LOG2E; /* exp(x scale) = exp2(x scale log2 e) */
  const int h = blockIdx.y, b = blockIdx.z, q0 = qb * AF_BQ;
  const size_t head = ((size_t)b * nh + h) * S * hd;
  const int wrow0 = q0 + warp * 16; /* this warp's first row */
  /* the last key tile: the block's last row's, or S's */
  const int last = (min(q0 + AF_BQ, S) - 1) / AB_BK;

  zero_pad_columns<HD, LDS, AF_THREADS>(Qs, QTILES + 4, hd);
#pragma unroll
  for (int i = 0; i < QTILES; i++)
    load_tile_async<HD, LDS, AF_THREADS>(Qs + i * TILE, qh + head, q0 + 64 * i, S, hd);
  load_tile_async<HD, LDS, AF_THREADS>(Ks, kh + head, 0, S, hd);
  load_tile_async<HD, LDS, AF_THREADS>(Vs, vh + head, 0, S, hd);
  cp_async_commit();

  unsigned qa[HD / 16][4];
  float o[HD / 8][4];
  zero_acc<HD / 8>(o);
  const int row[2] = {wrow0 + g, wrow0 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* l: this thread's columns */

  for (int kt = 0; kt <= last; kt++) {
    const int k0 = kt * AB_BK;
    cp_async_wait_all();
    __syncthreads(); /* tile kt landed; every warp is done with tile kt - 1's stage */
    if (kt == 0)
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) load_a<LDS>(qa[kk], Qs + warp * 16 * LDS, kk * 16);
    if (kt < last) {
      const int st = (kt + 1) % 2;
      load_tile_async<HD, LDS, AF_THREADS>(Ks + st * TILE, kh + head, k0 + AB_BK, S, hd);
      load_tile_async<HD, LDS, AF_THREADS>(Vs + st * TILE, vh + head, k0 + AB_BK, S, hd);
      cp_async_commit();
    }
    if (k0 > wrow0 + 15) continue; /* every key after every row of this warp */
    const bf16 *Kb = Ks + (kt % 2) * TILE, *Vb = Vs + (kt % 2) * TILE;

    float s[8][4];
    zero_acc<8>(s);
    mma_abt<HD, LDS>(s, qa, Kb);

    online_softmax_tile<HD>(s, o, m, l, k0, wrow0, row, S, scale_log2);
    unsigned pa[4][4];
    acc_to_a(pa, s);
    mma_px<HD, LDS>(o, pa, Vb);
  }

  forward_store<HD>(out, out_half, lse, o, m, l, row, wrow0, b, h, S, nh, hd, scale_log2, fp16);
}

/* ---- backward ---- */

/* acc (16 rows x NCOLS) += dS^T[r0.., keys] K[keys, col0..]: dQ's share of a
 * key block, KSTEPS k-steps of 16 keys in increasing order, the A fragments
 * read transposed from the [key][query] dS tile. */
template <int NCOLS, int LDS, int LDP, int KSTEPS>
__device__ __forceinline__ void mma_dq(float acc[NCOLS / 8][4], const bf16 *dSs, int r0,
                                       const bf16 *X, int col0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < KSTEPS; kk++) {
    unsigned a[4];
    load_a_trans<LDP>(a, dSs, r0, kk * 16);
#pragma unroll
    for (int np = 0; np < NCOLS / 16; np++) {
      unsigned b[4];
      ldsm_x4_trans(b, X + (kk * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * LDS + col0 + np * 16 +
                           8 * (lane / 16));
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

/* One block per (key block of 64 R keys, head, batch); warp w owns key rows
 * 16w..16w+15. Per query tile (64) meeting the block's keys: S^T = K Q^T,
 * dP^T = V dO^T, P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - D),
 * dV += bf16(P^T) dO, dK += bf16(dS^T) Q; finally dK *= scale. */
template <int HD, int R>
__global__ void __launch_bounds__(R *AB_THREADS)
    attention_bf16_dkv_kernel(float *dqkv, float *dq_part, const float *lse, const float *Dd,
                              const bf16 *qh, const bf16 *kh, const bf16 *vh, const bf16 *doh,
                              int S, int nh, int hd, float scale, uint16_t *dqkv_half,
                              const float *rope_cs, int half_fp16) {
  constexpr int LDS = HD + 8, TILE = 64 * LDS, LDP = 64 + 8, THREADS = R * AB_THREADS;
  constexpr int BK = 64 * R;
  /* dQ's share: 64 query rows x HD, split over the warps as 4 row groups
   * times CS column groups (a column group at least 16 wide) */
  constexpr int CS = R == 2 && HD >= 32 ? 2 : 1, NCOLS = HD / CS;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *Ks = (bf16 *)smem, *Vs = Ks + R * TILE;
  bf16 *Qs = Vs + R * TILE, *dOs = Qs + 2 * TILE; /* two stages each */
  bf16 *dSs = dOs + 2 * TILE;                     /* [BK keys][LDP]: dS for dQ */
  float *lse_s = (float *)(dSs + BK * LDP), *D_s = lse_s + 2 * AB_BQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int kb = blockIdx.x; /* the first key blocks see the most queries: start them first */
  const float scale_log2 = scale * (float)M_LOG2E;
  const int h = blockIdx.y, b = blockIdx.z, k0 = kb * BK, ntiles = (S + AB_BQ - 1) / AB_BQ;
  const int qt0 = kb * R; /* the first query tile meeting the block's keys */
  const size_t head = ((size_t)b * nh + h) * S * hd;
  const float *lse_bh = lse + ((size_t)b * nh + h) * S, *D_bh = Dd + ((size_t)b * nh + h) * S;
  float *part_bh = dq_part + ((size_t)b * nh + h) * dq_pairs_before(ntiles, R) * 64 * hd;

  zero_pad_columns<HD, LDS, THREADS>(Ks, 2 * R + 4, hd);
#pragma unroll
  for (int i = 0; i < R; i++) {
    load_tile_async<HD, LDS, THREADS>(Ks + i * TILE, kh + head, k0 + 64 * i, S, hd);
    load_tile_async<HD, LDS, THREADS>(Vs + i * TILE, vh + head, k0 + 64 * i, S, hd);
  }
  const int q00 = qt0 * AB_BQ;
  load_tile_async<HD, LDS, THREADS>(Qs, qh + head, q00, S, hd);
  load_tile_async<HD, LDS, THREADS>(dOs, doh + head, q00, S, hd);
  stage_lse_D<THREADS>(lse_s, D_s, lse_bh, D_bh, q00, S);
  cp_async_commit();

  float dk[HD / 8][4], dv[HD / 8][4];
  zero_acc<HD / 8>(dk);
  zero_acc<HD / 8>(dv);
  const int krow[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};

  for (int qt = qt0; qt < ntiles; qt++) {
    const int q0 = qt * AB_BQ, st = (qt - qt0) % 2;
    cp_async_wait_all();
    __syncthreads(); /* tile qt landed; every warp is done with the other stage */
    if (qt + 1 < ntiles) {
      const int nx = 1 - st, q1 = q0 + AB_BQ;
      load_tile_async<HD, LDS, THREADS>(Qs + nx * TILE, qh + head, q1, S, hd);
      load_tile_async<HD, LDS, THREADS>(dOs + nx * TILE, doh + head, q1, S, hd);
      stage_lse_D<THREADS>(lse_s + nx * AB_BQ, D_s + nx * AB_BQ, lse_bh, D_bh, q1, S);
      cp_async_commit();
    }
    const bf16 *Qb = Qs + st * TILE, *dOb = dOs + st * TILE;
    const float *lse_b = lse_s + st * AB_BQ, *D_b = D_s + st * AB_BQ;

    unsigned ka[HD / 16][4], va[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      load_a<LDS>(ka[kk], Ks + warp * 16 * LDS, kk * 16);
      load_a<LDS>(va[kk], Vs + warp * 16 * LDS, kk * 16);
    }
    float sp[8][4], dp[8][4];
    score_tiles<HD, LDS>(sp, dp, ka, Qb, va, dOb);
    dkv_probs(sp, dp, q0, krow, S, lse_b, D_b, scale_log2, qt < qt0 + R || q0 + AB_BQ > S);
    unsigned pa[4][4];
    acc_to_a(pa, sp);
    mma_px<HD, LDS>(dv, pa, dOb);
    acc_to_a(pa, dp);
    mma_px<HD, LDS>(dk, pa, Qb);
    /* dQ's share of this key block, dS K for the tile's 64 queries, from
     * the same bf16 dS through shared memory (a warp holds 16 keys' rows of
     * dS; a query row needs all BK): warp w takes query rows 16 (w % 4).. and
     * column group w / 4. One partial per (query tile, key block), summed
     * in increasing key block by attention_bf16_dq_reduce_kernel: no second
     * pass over S and dP. */
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      *(unsigned *)(dSs + (warp * 16 + g) * LDP + kk * 16 + 2 * t) = pa[kk][0];
      *(unsigned *)(dSs + (warp * 16 + g + 8) * LDP + kk * 16 + 2 * t) = pa[kk][1];
      *(unsigned *)(dSs + (warp * 16 + g) * LDP + kk * 16 + 8 + 2 * t) = pa[kk][2];
      *(unsigned *)(dSs + (warp * 16 + g + 8) * LDP + kk * 16 + 8 + 2 * t) = pa[kk][3];
    }
    __syncthreads(); /* every warp's dS rows are in place */
    if (warp < 4 * CS) {
      const int r0 = 16 * (warp % 4), col0 = NCOLS * (warp / 4);
      float dq[NCOLS / 8][4];
      zero_acc<NCOLS / 8>(dq);
      mma_dq<NCOLS, LDS, LDP, BK / 16>(dq, dSs, r0, Ks, col0);
      float *part = part_bh + (dq_pairs_before(qt, R) + kb) * 64 * hd;
#pragma unroll
      for (int half = 0; half < 2; half++) {
        float *d = part + (size_t)(r0 + g + 8 * half) * hd + col0;
#pragma unroll
        for (int nt = 0; nt < NCOLS / 8; nt++)
          if (col0 + nt * 8 < hd)
            *(float2 *)(d + nt * 8 + 2 * t) = make_float2(dq[nt][2 * half], dq[nt][2 * half + 1]);
      }
    }
  }
  dkv_store<HD>(dqkv, dqkv_half, dk, dv, b, h, S, nh, hd, k0 + warp * 16, scale, rope_cs,
                half_fp16);
}

/* dQ[b, q, h, :] = scale * the sum over key blocks kb <= q's tile / R, in
 * increasing kb, of the dkv kernel's partials. A block per (query tile,
 * head, batch), a thread per four columns of a row: no index division (the
 * thread-per-element form divided a 64-bit index by S, nh and hd for every
 * element, and that integer work, not the partials' bytes, bounded it). */
#ifndef DQ_REDUCE_X    /* tuning constants a variant build may set (bench/build_variants.sh) */
#define DQ_REDUCE_X 16 /* threads across a row: 4 columns each */
#endif
#ifndef DQ_REDUCE_Y
#define DQ_REDUCE_Y 16 /* rows at a time */
#endif
/* partials a thread loads before adding them (still in increasing kb: the same sums); 1 leaves
 * the loop to the compiler */
#ifndef DQ_REDUCE_UNROLL
#define DQ_REDUCE_UNROLL 1
#endif
__global__ void __launch_bounds__(DQ_REDUCE_X *DQ_REDUCE_Y)
    attention_bf16_dq_reduce_kernel(float *dqkv, const float *dq_part, int S, int nh, int hd,
                                    float scale, int R, uint16_t *dqkv_half, const float *rope_cs,
                                    int half_fp16) {
  const int ntiles = (S + AB_BQ - 1) / AB_BQ;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const size_t tile = (size_t)64 * hd;
  const float *part =
      dq_part + (((size_t)b * nh + h) * dq_pairs_before(ntiles, R) + dq_pairs_before(qt, R)) * tile;
  const int nkb = qt / R + 1;
  for (int r = threadIdx.y; r < AB_BQ && qt * AB_BQ + r < S; r += DQ_REDUCE_Y)
    for (int c = 4 * threadIdx.x; c < hd; c += 4 * DQ_REDUCE_X) {
      const float *p = part + (size_t)r * hd + c;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      int kb = 0;
      if constexpr (DQ_REDUCE_UNROLL > 1)
        for (; kb + DQ_REDUCE_UNROLL <= nkb; kb += DQ_REDUCE_UNROLL) {
          float4 v[DQ_REDUCE_UNROLL];
#pragma unroll
          for (int u = 0; u < DQ_REDUCE_UNROLL; u++)
            v[u] = *(const float4 *)(p + (size_t)(kb + u) * tile);
#pragma unroll
          for (int u = 0; u < DQ_REDUCE_UNROLL; u++)
            acc.x += v[u].x, acc.y += v[u].y, acc.z += v[u].z, acc.w += v[u].w;
        }
      for (; kb < nkb; kb++) {
        const float4 v = *(const float4 *)(p + (size_t)kb * tile);
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
      dq_store4(dqkv, dqkv_half, acc, b, qt * AB_BQ + r, h, c, S, nh, hd, scale, rope_cs,
                half_fp16);
    }
}

/* ---- the rounding pass ---- */

/* dst [nparts][B][nh][S][hd] bf16 from src [B*S][nparts*nh*hd] fp32 (qkv:
 * nparts 3, dout: 1), 8 elements a thread (hd % 16 == 0 keeps them in one row). */
__global__ void heads_to_bf16_kernel(bf16 *dst, const float *src, int B, int S, int nparts, int nh,
                                     int hd) {
  const size_t n8 = (size_t)nparts * B * nh * S * hd / 8;
  for (size_t i8 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i8 < n8;
       i8 += (size_t)gridDim.x * blockDim.x) {
    const size_t e = i8 * 8;
    size_t r = e / hd;
    const int c = (int)(e % hd), s = (int)(r % S);
    r /= S;
    const int h = (int)(r % nh);
    r /= nh;
    const int b = (int)(r % B), part = (int)(r / B);
    const float *p =
        src + ((size_t)b * S + s) * nparts * nh * hd + (size_t)part * nh * hd + (size_t)h * hd + c;
    const float4 x = *(const float4 *)p, y = *(const float4 *)(p + 4);
    uint4 v;
    v.x = pack_bf16(x.x, x.y), v.y = pack_bf16(x.z, x.w);
    v.z = pack_bf16(y.x, y.y), v.w = pack_bf16(y.z, y.w);
    *(uint4 *)(dst + e) = v;
  }
}

static void heads_to_bf16(bf16 *dst, const float *src, int B, int S, int nparts, int nh, int hd) {
  const size_t n8 = (size_t)nparts * B * nh * S * hd / 8;
  heads_to_bf16_kernel<<<rc_grid_1d(n8, 256), 256, 0, rc_cuda_stream()>>>(dst, src, B, S, nparts,
                                                                          nh, hd);
  KERNEL_CHECK();
}

/* dout's bf16 heads [B][nh][S][hd] and D[b, h, i] = rowsum(bf16(dout) *
 * bf16(out)) in one pass over dout (a rounding pass and the D kernel each
 * read it before). Eight lanes per (row, head), each with 8 columns (two
 * pieces at hd > 64): a warp reads four heads' whole rows, 1 KB of dout in
 * one go, where a thread per (row, head) read 32 scattered bytes at a time
 * and waited on each (session 20: the 64 x 8 columns of gpu-small's rows
 * now land coalesced). D folds in increasing d, each product rounded before
 * its add, as the CPU does: the lanes' products are summed by their owners
 * in turn, the running sum handed on by a shuffle, so the order is the CPU's
 * and the bits the one-thread loop's. hd % 8 == 0. out is the forward's fp32
 * output (rounded here) or, with out_bf16, its bf16 copy (the same values: no
 * fp32 output need be kept). */
template <int HD>
__global__ void dout_heads_rowdot_kernel(bf16 *doh, float *Dd, const float *dout, const float *out,
                                         const uint16_t *out_bf16, int B, int S, int nh, int hd) {
  constexpr int PIECES = (HD + 63) / 64; /* pieces of 8 columns a lane */
  const size_t n = (size_t)B * S * nh * 8;
  const int lane = threadIdx.x % 32, sub = lane % 8, npieces = hd / 8;
  /* the loop bound is the warp's, so every lane reaches every shuffle */
  for (size_t warp0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x - lane; warp0 < n;
       warp0 += (size_t)gridDim.x * blockDim.x) {
    const size_t idx = warp0 + lane, pair = idx / 8, row = pair / nh;
    const bool live = idx < n;
    const int h = (int)(pair % nh), b = (int)(row / S), i = (int)(row % S);
    const size_t src = row * nh * hd + (size_t)h * hd;
    bf16 *dst = doh + (((size_t)b * nh + h) * S + i) * hd;
    float prod[PIECES][8] = {};
#pragma unroll
    for (int k = 0; k < PIECES; k++) {
      const int d = 8 * (sub + 8 * k);
      if (!live || d >= hd) continue;
      const float4 x0 = *(const float4 *)(dout + src + d),
                   x1 = *(const float4 *)(dout + src + d + 4);
      const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float ys[8];
      if (out_bf16) {
        const uint4 y = *(const uint4 *)(out_bf16 + src + d);
        const uint32_t w[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
          ys[2 * e] = __uint_as_float(w[e] << 16),
                 ys[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
      } else {
        const float4 y0 = *(const float4 *)(out + src + d),
                     y1 = *(const float4 *)(out + src + d + 4);
        const float yf[8] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
#pragma unroll
        for (int e = 0; e < 8; e++) ys[e] = rc_round_bf16(yf[e]);
      }
#pragma unroll
      for (int e = 0; e < 8; e++) prod[k][e] = __fmul_rn(rc_round_bf16(xs[e]), ys[e]);
      uint4 v;
      v.x = pack_bf16(x0.x, x0.y), v.y = pack_bf16(x0.z, x0.w);
      v.z = pack_bf16(x1.x, x1.y), v.w = pack_bf16(x1.z, x1.w);
      *(uint4 *)(dst + d) = v;
    }
    /* piece j's owner adds its 8 products to the sum so far, then hands it on */
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
      if (j >= npieces) break; /* npieces is the whole warp's */
      if (sub == j % 8) {
#pragma unroll
        for (int e = 0; e < 8; e++) acc = __fadd_rn(acc, prod[j / 8][e]);
      }
      acc = __shfl_sync(0xffffffffu, acc, (lane & ~7) + j % 8);
    }
    if (live && sub == 0) Dd[((size_t)b * nh + h) * S + i] = acc;
  }
}

/* ---- host side ---- */

template <int HD> static size_t tile_bytes(void) {
  return (size_t)64 * (HD + 8) * sizeof(bf16);
}

/* The q, k, v heads the kernels read: rope_forward's (heads, when the
 * caller kept them) or qkv rounded here into scratch. */
static const bf16 *qkv_heads(const float *qkv, const uint16_t *heads, int B, int S, int nh,
                             int hd) {
  if (heads) return (const bf16 *)heads;
  bf16 *qh = (bf16 *)rc_cuda_scratch(RC_SCRATCH_ATTN_BF16, (size_t)3 * B * nh * S * hd * 2);
  heads_to_bf16(qh, qkv, B, S, 3, nh, hd);
  return qh;
}

template <int HD>
static void forward_bf16(float *out, float *lse, const float *qkv, const uint16_t *heads, int B,
                         int S, int nh, int hd, uint16_t *out_half, rc_compute half_ct) {
  static bool opted = false;
  const size_t per_part = (size_t)B * nh * S * hd;
  const bf16 *qh = qkv_heads(qkv, heads, B, S, nh, hd);
  if (HD <= 64 && rc_cuda_attention_wgmma_on()) { /* Hopper: cuda_attention_wgmma.cu */
    rc_cuda_attention_wgmma_forward(out, lse, (const uint16_t *)qh, B, S, nh, hd, out_half,
                                    half_ct);
    return;
  }
  const size_t sm = (AF_BQ / 64 + 4) * tile_bytes<HD>(); /* Q, two stages of K and V */
  rc_allow_smem(attention_bf16_forward_kernel<HD>, sm, &opted);
  dim3 grid((unsigned int)((S + AF_BQ - 1) / AF_BQ), (unsigned int)nh, (unsigned int)B);
  attention_bf16_forward_kernel<HD><<<grid, AF_THREADS, sm, rc_cuda_stream()>>>(
      out, lse, qh, qh + per_part, qh + 2 * per_part, S, nh, hd, 1.0f / sqrtf((float)hd), out_half,
      half_ct == RC_COMPUTE_FP16);
  KERNEL_CHECK();
}

template <int HD>
static void backward_bf16(float *dqkv, const float *dout, const float *out, const float *lse,
                          const float *qkv, const uint16_t *heads, int B, int S, int nh, int hd,
                          const uint16_t *out_bf16, float rope_theta, uint16_t *dqkv_half,
                          rc_compute half_ct) {
  static bool opted_dkv = false;
  cudaStream_t s = rc_cuda_stream();
  const size_t per_part = (size_t)B * nh * S * hd;
  /* scratch: dout's heads, then (without the caller's heads) q, k, v */
  bf16 *doh =
      (bf16 *)rc_cuda_scratch(RC_SCRATCH_ATTN_BF16, (heads ? 1 : 4) * per_part * sizeof(bf16));
  const bf16 *qh = (const bf16 *)heads;
  if (!heads) {
    heads_to_bf16(doh + per_part, qkv, B, S, 3, nh, hd);
    qh = doh + per_part;
  }
  const bf16 *kh = qh + per_part, *vh = qh + 2 * per_part;
  /* dout's heads and D = rowsum(bf16(dout) * bf16(out)), the CPU's loop */
  const size_t nrows = (size_t)B * S * nh;
  float *Dd = (float *)rc_cuda_scratch(RC_SCRATCH_ATTN, nrows * sizeof(float));
  dout_heads_rowdot_kernel<HD>
      <<<rc_grid_1d(nrows * 8, 256), 256, 0, s>>>(doh, Dd, dout, out, out_bf16, B, S, nh, hd);
  KERNEL_CHECK();
  constexpr int R = AB_DKV_R;
  const size_t sm_dkv = (2 * R + 4) * tile_bytes<HD>() + (size_t)64 * R * (64 + 8) * sizeof(bf16) +
                        4 * AB_BQ * sizeof(float);
  rc_allow_smem(attention_bf16_dkv_kernel<HD, R>, sm_dkv, &opted_dkv);
  const int ntiles = (S + AB_BQ - 1) / AB_BQ, nkb = (S + 64 * R - 1) / (64 * R);
  float *dq_part =
      (float *)rc_cuda_scratch(RC_SCRATCH_ATTN_DQ, (size_t)B * nh * dq_pairs_before(ntiles, R) *
                                                       64 * (size_t)hd * sizeof(float));
  float scale = 1.0f / sqrtf((float)hd);
  /* dqkv_half: RoPE's backward in both kernels' stores (ops.h), its table */
  const float *rope_cs = dqkv_half ? rc_cuda_rope_table(S, hd, rope_theta) : NULL;
  const int half_fp16 = half_ct == RC_COMPUTE_FP16;
  if (HD <= 64 && rc_cuda_attention_wgmma_on()) /* Hopper: cuda_attention_wgmma.cu */
    rc_cuda_attention_wgmma_dkv(dqkv, dq_part, lse, Dd, (const uint16_t *)qh, (const uint16_t *)doh,
                                B, S, nh, hd, dqkv_half, rope_cs, half_ct);
  else
    attention_bf16_dkv_kernel<HD, R>
        <<<dim3((unsigned int)nkb, (unsigned int)nh, (unsigned int)B), R * AB_THREADS, sm_dkv, s>>>(
            dqkv, dq_part, lse, Dd, qh, kh, vh, doh, S, nh, hd, scale, dqkv_half, rope_cs,
            half_fp16);
  KERNEL_CHECK();
  attention_bf16_dq_reduce_kernel<<<dim3((unsigned int)ntiles, (unsigned int)nh, (unsigned int)B),
                                    dim3(DQ_REDUCE_X, DQ_REDUCE_Y), 0, s>>>(
      dqkv, dq_part, S, nh, hd, scale, R, dqkv_half, rope_cs, half_fp16);
  KERNEL_CHECK();
}

static void check_bf16_head_dim(int hd) {
  if (hd % 16 || hd > 128) {
    fprintf(stderr,
            "resumecheck: bf16 attention needs a head dim that is a multiple of 16, at most 128 "
            "(got %d)\n",
            hd);
    abort();
  }
}

void rc_cuda_attention_bf16_forward(float *out, float *lse, const float *qkv, const uint16_t *heads,
                                    int B, int S, int nh, int hd, uint16_t *out_half,
                                    rc_compute half_ct) {
  check_bf16_head_dim(hd);
  if (hd <= 16)
    forward_bf16<16>(out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
  else if (hd <= 32)
    forward_bf16<32>(out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
  else if (hd <= 64)
    forward_bf16<64>(out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
  else
    forward_bf16<128>(out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
}

void rc_cuda_attention_bf16_backward(float *dqkv, const float *dout, const float *out,
                                     const float *lse, const float *qkv, const uint16_t *heads,
                                     int B, int S, int nh, int hd, const uint16_t *out_bf16,
                                     float rope_theta, uint16_t *dqkv_half, rc_compute half_ct) {
  check_bf16_head_dim(hd);
  if (hd <= 16)
    backward_bf16<16>(dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16, rope_theta,
                      dqkv_half, half_ct);
  else if (hd <= 32)
    backward_bf16<32>(dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16, rope_theta,
                      dqkv_half, half_ct);
  else if (hd <= 64)
    backward_bf16<64>(dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16, rope_theta,
                      dqkv_half, half_ct);
  else
    backward_bf16<128>(dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16, rope_theta,
                       dqkv_half, half_ct);
}
