/* cuda_attention_wgmma.cu — the BF16 attention's forward and dK/dV kernels
 * on Hopper's warpgroup MMA (wgmma), for head dims up to 64: the same
 * contract, tiles, order and row arithmetic as the mma.sync kernels
 * (cuda_attention_bf16.cu, whose rounding pass, dQ partials and reduction
 * this path shares), with each tile product issued by a warpgroup (4 warps,
 * 64 rows) from shared memory.
 *
 * Why: mma.sync feeds every 16 x 8 product from registers that ldmatrix
 * loaded, each warp its own copy of every K and V fragment, and its forward
 * ran at about half of cuDNN's rate. wgmma reads both operands from shared
 * memory for 64 rows at a time. Measured at gpu-small (bench/NOTES.md,
 * sessions 19 and 20, event-timed): forward 0.091 -> 0.056 ms, backward
 * 0.331 -> 0.211 ms a call; the dK/dV kernel stays bound by latency and its
 * two block barriers a tile rather than by the tensor pipe. (A variant with
 * its query tiles software-pipelined, one barrier a tile, was 1-1.5% faster
 * on the H200, and with dQ's reduction fused into it 39% slower: measured
 * in session 26 (bench/NOTES.md), removed in session 27.)
 *
 * Layout: every tile is [64 rows][64 bf16] = 128-byte rows in the 128-byte
 * swizzle (cuda_wgmma.cuh), written by cp.async, read through matrix
 * descriptors. S = Q K^T and S^T = K Q^T take both operands K-major; P V,
 * P^T dO and dS^T Q take the probabilities from registers (the accumulator's
 * layout rounded to bf16, as mma.sync's A operand) and the tile MN-major;
 * dQ = dS K reads dS^T's tile and K both MN-major. bench/wgmma_probe.cu
 * checks each layout alone.
 *
 * Determinism: each product is a fixed sequence of wgmma k-steps in
 * increasing k. A k-step's products sum as mma.sync's do (the probe: S
 * bitwise equal), and the row arithmetic is the shared online_softmax_probs,
 * rescale_rows and forward_store, so the forward gives the mma.sync
 * forward's bits; the dK/dV kernel's dQ share is the same chain over 128
 * keys as mma.sync's, and dK, dV the same k-steps: the backward gives the
 * mma.sync backward's bits too (session 20). Which path ran is in the
 * run's record (cuda_module.cu describe(); RC_CUDA_ATTENTION=mma selects the
 * mma.sync kernels).
 *
 * The wgmma instructions exist only in sm_90a code. The build adds that
 * target for the module when it is asked for sm_90 (CMakeLists.txt); a
 * module whose sm_90a code did not load (another GPU, another build) reports
 * the path unavailable through wgmma_compiled_kernel, and the mma.sync
 * kernels run. */
#include <string.h>

#include "cuda_attention_bf16.cuh"
#include "cuda_wgmma.cuh"

/* ---- tiles ---- */

#define AW_TILE (64 * 64) /* elements of a swizzled tile: 8 KB */

/* rows [r0, r0 + 64) of one head's [S x hd] block (hd <= 64, a multiple of
 * 8) into a swizzled tile, asynchronously; rows >= S and columns >= hd
 * become zeros. A fixed count of copies a thread, no branches: the loop it
 * replaced (a bound per thread, a skip per chunk) was a tenth of the dK/dV
 * kernel's samples (session 20). */
template <int THREADS>
__device__ __forceinline__ void load_tile_sw128(bf16 *dst, const bf16 *head, int r0, int S,
                                                int hd) {
  static_assert(64 * 8 % THREADS == 0, "whole rounds of 16-byte chunks");
#pragma unroll
  for (int k = 0; k < 64 * 8 / THREADS; k++) {
    const int idx = (int)threadIdx.x + k * THREADS, r = idx / 8, c = (idx % 8) * 8;
    const bool valid = r0 + r < S && c < hd;
    cp_async16(dst + sw128(r, c), valid ? head + (size_t)(r0 + r) * hd + c : head, valid);
  }
}

/* ---- forward ---- */

#define AW_WARPGROUPS 2
#define AW_THREADS (AW_WARPGROUPS * 128)
#define AW_BQ (AW_WARPGROUPS * 64) /* query rows a block owns: 64 per warpgroup */

/* One block per (query block of 128 rows, head, batch); warpgroup wg owns
 * rows 64 wg.., its warp w (of 8) rows 16 w.. as in the mma.sync kernel.
 * Key tiles of 64 up to the warpgroup's last row, K and V staged in pairs,
 * three stages deep. A warp inside a warpgroup whose 16 rows all precede a
 * tile computes it masked: p = 0 and a rescale by exactly 1, the bits of
 * skipping it.
 *
 * The products overlap the softmax (FlashAttention-3's intra-warpgroup
 * pipelining): tile kt's P V and tile kt + 1's scores are issued together,
 * and tile kt + 1's max, exponentials and sums run while P V does; only the
 * rescale of O waits for it. Every row sees the same operations in the same
 * order as without the overlap: O *= alpha(kt), then O += P(kt) V(kt). */
#define AW_STAGES 3
__global__ void __launch_bounds__(AW_THREADS, 2)
    attention_wgmma_forward_kernel(float *out, float *lse, const bf16 *qh, const bf16 *kh,
                                   const bf16 *vh, int S, int nh, int hd, float scale,
                                   uint16_t *out_half, int fp16) {
  extern __shared__ unsigned char smem_raw[];
  bf16 *Qs = (bf16 *)smem_align1024(smem_raw);
  bf16 *KVs = Qs + AW_WARPGROUPS * AW_TILE; /* stage st: K at 2 st, V at 2 st + 1 */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, wg = warp / 4;
  /* blocks start in increasing linear index, x fastest: the query block is
   * z, longest rows first, so the short blocks fill the last wave's gaps
   * (with it x, a quarter of the SMs' cycles were idle tail: Nsight Compute) */
  const int qb = gridDim.z - 1 - blockIdx.z;
  const float scale_log2 = scale * (float)M_LOG2E; /* exp(x scale) = exp2(x scale log2 e) */
  const int h = blockIdx.x, b = blockIdx.y, q0 = qb * AW_BQ;
  const size_t head = ((size_t)b * nh + h) * S * hd;
  const int wrow0 = q0 + warp * 16, grow0 = q0 + wg * 64; /* this warp's, warpgroup's first row */
  const int last = (min(q0 + AW_BQ, S) - 1) / AB_BK;      /* the block's last key tile */
  const int wlast = min(last, (grow0 + 63) / AB_BK);      /* the warpgroup's */

#pragma unroll
  for (int i = 0; i < AW_WARPGROUPS; i++)
    load_tile_sw128<AW_THREADS>(Qs + i * AW_TILE, qh + head, q0 + 64 * i, S, hd);
  for (int j = 0; j <= min(last, 1); j++) {
    load_tile_sw128<AW_THREADS>(KVs + 2 * j * AW_TILE, kh + head, j * AB_BK, S, hd);
    load_tile_sw128<AW_THREADS>(KVs + (2 * j + 1) * AW_TILE, vh + head, j * AB_BK, S, hd);
    cp_async_commit();
  }

  float o[8][4], s[8][4];
  zero_acc<8>(o);
  const int row[2] = {wrow0 + g, wrow0 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* l: this thread's columns */
  const bf16 *Qw = Qs + wg * AW_TILE;

  /* tile 0's scores (Q and pair 0 are the first group) */
  if (last >= 1)
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  else
    cp_async_wait_all();
  fence_proxy_async();
  __syncthreads();
  wgmma_fence();
  wgmma_tile_kk(s, Qw, KVs);
  wgmma_commit_wait();

  /* Each tile kt of the block takes one barrier, whoever needs it: pair
   * kt + 1 is visible after it, and every P V of tile kt - 1 is done, so
   * pair kt + 2 may take that stage. */
  auto stage_step = [&](int kt) {
    if (kt < last) cp_async_wait_all(); /* pair kt + 1 (the only group in flight) */
    fence_proxy_async();
    __syncthreads();
    if (kt + 2 <= last) {
      const int st = (kt + 2) % AW_STAGES;
      load_tile_sw128<AW_THREADS>(KVs + 2 * st * AW_TILE, kh + head, (kt + 2) * AB_BK, S, hd);
      load_tile_sw128<AW_THREADS>(KVs + (2 * st + 1) * AW_TILE, vh + head, (kt + 2) * AB_BK, S, hd);
      cp_async_commit();
    }
  };
  /* tile kt's softmax; the rescale waits for tile kt - 1's P V */
  auto softmax_step = [&](int kt, unsigned pa[4][4]) {
    float alpha[2];
    online_softmax_probs(s, m, l, alpha, kt * AB_BK, wrow0, row, S, scale_log2);
    wgmma_wait();
    rescale_rows<64>(o, alpha);
    acc_to_a(pa, s);
  };
  /* The loops below issue every wgmma unconditionally: a wgmma under a
   * branch the compiler cannot prove warpgroup-uniform is serialized. */
  int kt = 0;
  for (; kt < wlast; kt++) {
    unsigned pa[4][4];
    softmax_step(kt, pa);
    stage_step(kt);
    const bf16 *Kn = KVs + 2 * ((kt + 1) % AW_STAGES) * AW_TILE;
    const bf16 *Vb = KVs + (2 * (kt % AW_STAGES) + 1) * AW_TILE;
    wgmma_fence();
    wgmma_tile_kk(s, Qw, Kn);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < 4; kk++) /* k-steps of 16 keys: 16 rows down V */
      wgmma_rs_mn(o, pa[kk], desc_sw128(Vb + 16 * 64 * kk));
    wgmma_commit();
    wgmma_wait_all_but_last(); /* the scores */
  }
  { /* the warpgroup's last tile: P V only */
    unsigned pa[4][4];
    softmax_step(kt, pa);
    stage_step(kt);
    const bf16 *Vb = KVs + (2 * (kt % AW_STAGES) + 1) * AW_TILE;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wgmma_rs_mn(o, pa[kk], desc_sw128(Vb + 16 * 64 * kk));
    wgmma_commit_wait();
  }
  for (kt++; kt <= last; kt++) stage_step(kt); /* the other warpgroup's tiles */
  forward_store<64>(out, out_half, lse, o, m, l, row, wrow0, b, h, S, nh, hd, scale_log2, fp16);
}

/* ---- backward: dK and dV (dQ's partials) ---- */

/* The end of the dK/dV kernel: the block's dK (times scale) and dV, 128
 * keys x hd each, through shared memory (stage: 2 x 128 x AW_STAGE_LD
 * floats, free once every warp is past the loop) and out by rows, eight
 * threads a row's 64 columns, 16- or 32-byte stores. The same values and
 * operations as dkv_store's fragment-wise stores (the scale multiply, RoPE's
 * rotation back for dK, the encoding), in a loop that is not unrolled: the
 * fragment-wise form was ~4000 instructions run once a warp, whose
 * instruction-cache misses and scattered 4-byte stores made a tenth of the
 * kernel's samples (session 20). */
#define AW_STAGE_LD 72 /* floats a staged row: 64-bit stores of a half-warp hit 16 banks */
__device__ void dkv_store_staged(float *stage, const float dk[8][4], const float dv[8][4],
                                 float *dqkv, uint16_t *dqkv_half, int b, int h, int S, int nh,
                                 int hd, int k0, float scale, const float *rope_cs, int half_fp16) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  __syncthreads(); /* every warpgroup's last products have read the tiles */
#pragma unroll
  for (int half = 0; half < 2; half++) {
    float *rk = stage + (16 * warp + g + 8 * half) * AW_STAGE_LD + 2 * t;
    float *rv = rk + 128 * AW_STAGE_LD;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      *(float2 *)(rk + nt * 8) = make_float2(dk[nt][2 * half], dk[nt][2 * half + 1]);
      *(float2 *)(rv + nt * 8) = make_float2(dv[nt][2 * half], dv[nt][2 * half + 1]);
    }
  }
  __syncthreads();
  const size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  const int half_hd = hd / 2;
#pragma unroll 1
  for (int idx = threadIdx.x; idx < 2 * 128 * 8; idx += AW_THREADS) {
    const int is_v = idx / (128 * 8), r = idx / 8 % 128, c = idx % 8 * 8, key = k0 + r;
    if (key >= S || c >= hd) continue;
    const float *src = stage + (is_v * 128 + r) * AW_STAGE_LD + c;
    const float4 x0 = *(const float4 *)src, x1 = *(const float4 *)(src + 4);
    const float sc = is_v ? 1.0f : scale;
    float v[8] = {x0.x * sc, x0.y * sc, x0.z * sc, x0.w * sc,
                  x1.x * sc, x1.y * sc, x1.z * sc, x1.w * sc};
    const size_t at = ((size_t)b * S + key) * row + (1 + is_v) * orow + (size_t)h * hd + c;
    if (!dqkv_half) {
      *(float4 *)(dqkv + at) = make_float4(v[0], v[1], v[2], v[3]);
      *(float4 *)(dqkv + at + 4) = make_float4(v[4], v[5], v[6], v[7]);
      continue;
    }
    if (!is_v) { /* RoPE's backward: pairs c/2.. of position key rotated back */
      const float *cs = rope_cs + (size_t)key * half_hd + c / 2;
      const float4 cv = *(const float4 *)cs, sv = *(const float4 *)(cs + (size_t)S * half_hd);
      const float cc[4] = {cv.x, cv.y, cv.z, cv.w}, ss[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float2 o = rc_rope_rotate(v[2 * j], v[2 * j + 1], cc[j], -1.0f * ss[j]);
        v[2 * j] = o.x, v[2 * j + 1] = o.y;
      }
    }
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
      w[j] = half_fp16
                 ? (unsigned)rc_fp16_encode(v[2 * j]) | (unsigned)rc_fp16_encode(v[2 * j + 1]) << 16
                 : (unsigned)rc_bf16_encode(v[2 * j]) | (unsigned)rc_bf16_encode(v[2 * j + 1])
                                                            << 16;
    *(uint4 *)(dqkv_half + at) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

/* A warp's bf16 dS^T fragments (dK's A operand) into its warpgroup's
 * [64 keys][64 queries] swizzled tile for dQ: row = key, column = query. */
__device__ __forceinline__ void store_dS_tile(bf16 *dSw, const unsigned pb[4][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int r = (warp % 4) * 16 + g;
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    const int c = kk * 16 + 2 * t;
    *(unsigned *)(dSw + sw128(r, c)) = pb[kk][0];
    *(unsigned *)(dSw + sw128(r + 8, c)) = pb[kk][1];
    *(unsigned *)(dSw + sw128(r, c + 8)) = pb[kk][2];
    *(unsigned *)(dSw + sw128(r + 8, c + 8)) = pb[kk][3];
  }
}

/* This thread's first element of a warpgroup's dQ share (64 queries x head
 * dims 32 wg..32 wg + 31) in a partial tile [64 queries][hd] at part */
__device__ __forceinline__ float *dq_partial_slot(float *part, int hd) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  return part + (size_t)(16 * (warp % 4) + g) * hd + 32 * (warp / 4) + 2 * t;
}

/* The share's fragments from this thread's slot d (dq_partial_slot). With
 * hd = 64 (gpu-small's) no store is tested: under a test each one had its
 * own copy of the slot's address arithmetic (~40 instructions a store). */
__device__ __forceinline__ void store_dq_partial(float *d, const float dq[4][4], int hd) {
  const int wg = threadIdx.x / 128;
  if (hd == 64) {
#pragma unroll
    for (int half = 0; half < 2; half++)
#pragma unroll
      for (int nt = 0; nt < 4; nt++)
        *(float2 *)(d + 8 * 64 * half + nt * 8) =
            make_float2(dq[nt][2 * half], dq[nt][2 * half + 1]);
    return;
  }
#pragma unroll
  for (int half = 0; half < 2; half++)
#pragma unroll
    for (int nt = 0; nt < 4; nt++)
      if (32 * wg + nt * 8 < hd)
        *(float2 *)(d + (size_t)(8 * half) * hd + nt * 8) =
            make_float2(dq[nt][2 * half], dq[nt][2 * half + 1]);
}

/* dV += bf16(P^T) dO and dK += bf16(dS^T) Q for a warpgroup's 64 keys, the
 * probabilities as register operands, dO's and Q's tiles MN-major: issued,
 * not committed */
__device__ __forceinline__ void issue_dv_dk(float dv[8][4], float dk[8][4], const unsigned pa[4][4],
                                            const unsigned pb[4][4], const bf16 *dOb,
                                            const bf16 *Qb) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) wgmma_rs_mn(dv, pa[kk], desc_sw128(dOb + 16 * 64 * kk));
#pragma unroll
  for (int kk = 0; kk < 4; kk++) wgmma_rs_mn(dk, pb[kk], desc_sw128(Qb + 16 * 64 * kk));
}

/* dQ's share dS K over the block's R x 64 keys, 16 a k-step in increasing
 * key (the mma.sync kernel's chain; tile kk / 4, 16 rows down dS^T and K a
 * step), head dims 32 wg..32 wg + 31: issued, not committed */
template <int R>
__device__ __forceinline__ void issue_dq_share(float dq[4][4], const bf16 *dS, const bf16 *Ks,
                                               int wg) {
  wgmma_ss_mm_n32<false>(dq, desc_sw128(dS), desc_sw128(Ks + 32 * wg));
#pragma unroll
  for (int kk = 1; kk < 4 * R; kk++) {
    const int off = kk / 4 * AW_TILE + 16 * 64 * (kk % 4);
    wgmma_ss_mm_n32(dq, desc_sw128(dS + off), desc_sw128(Ks + off + 32 * wg));
  }
}

/* One block per (key block of 128 keys, head, batch), warpgroup wg owning
 * keys 64 wg.., its warp w (of 8) keys 16 w.. as in the mma.sync kernel
 * (cuda_attention_bf16.cu, R = 2, the same partials layout and reduction).
 * Per query tile (64) meeting the keys: S^T = K Q^T and dP^T = V dO^T from
 * shared memory, dkv_probs, then dV += bf16(P^T) dO and dK += bf16(dS^T) Q
 * with the probabilities as register operands, issued without waiting while
 * dS^T goes to shared memory; after a block barrier dQ's share dS K
 * (both warpgroups' dS^T tiles read transposed) is split by columns:
 * warpgroup wg sums all 128 keys for head dims 32 wg.., one chain in
 * increasing key as the mma.sync kernel's, and stores its half. (Until
 * session 20 each warpgroup summed its own 64 keys for all 64 columns and
 * warpgroup 1 handed its share to warpgroup 0 through shared memory: a
 * second block barrier, 16 KB of shared traffic and other bits.) */
#define AW_DKV_BK 128
__global__ void __launch_bounds__(AW_THREADS, 1)
    attention_wgmma_dkv_kernel(float *dqkv, float *dq_part, const float *lse, const float *Dd,
                               const bf16 *qh, const bf16 *kh, const bf16 *vh, const bf16 *doh,
                               int S, int nh, int hd, float scale, uint16_t *dqkv_half,
                               const float *rope_cs, int half_fp16) {
  constexpr int R = AW_DKV_BK / 64;
  extern __shared__ unsigned char smem_raw[];
  bf16 *Ks = (bf16 *)smem_align1024(smem_raw);
  bf16 *Vs = Ks + R * AW_TILE, *Qs = Vs + R * AW_TILE, *dOs = Qs + 2 * AW_TILE; /* two stages */
  bf16 *dSs = dOs + 2 * AW_TILE; /* dS^T, a [64 keys][64 queries] tile per wg */
  float *lse_s = (float *)(dSs + R * AW_TILE), *D_s = lse_s + 2 * AB_BQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int wg = warp / 4;
  const int kb = blockIdx.z; /* the first key blocks see the most queries: z, so they start first */
  const float scale_log2 = scale * (float)M_LOG2E;
  const int h = blockIdx.x, b = blockIdx.y, k0 = kb * AW_DKV_BK, ntiles = (S + AB_BQ - 1) / AB_BQ;
  const int qt0 = kb * R; /* the first query tile meeting the block's keys */
  const size_t head = ((size_t)b * nh + h) * S * hd;
  const float *lse_bh = lse + ((size_t)b * nh + h) * S, *D_bh = Dd + ((size_t)b * nh + h) * S;
  float *part_bh = dq_part + ((size_t)b * nh + h) * dq_pairs_before(ntiles, R) * 64 * hd;

#pragma unroll
  for (int i = 0; i < R; i++) {
    load_tile_sw128<AW_THREADS>(Ks + i * AW_TILE, kh + head, k0 + 64 * i, S, hd);
    load_tile_sw128<AW_THREADS>(Vs + i * AW_TILE, vh + head, k0 + 64 * i, S, hd);
  }
  const int q00 = qt0 * AB_BQ;
  load_tile_sw128<AW_THREADS>(Qs, qh + head, q00, S, hd);
  load_tile_sw128<AW_THREADS>(dOs, doh + head, q00, S, hd);
  stage_lse_D<AW_THREADS>(lse_s, D_s, lse_bh, D_bh, q00, S);
  cp_async_commit();

  float dk[8][4], dv[8][4];
  zero_acc<8>(dk);
  zero_acc<8>(dv);
  const int krow[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const bf16 *Kw = Ks + wg * AW_TILE, *Vw = Vs + wg * AW_TILE;
  bf16 *dSw = dSs + wg * AW_TILE;

  for (int qt = qt0; qt < ntiles; qt++) {
    const int q0 = qt * AB_BQ, st = (qt - qt0) % 2;
    cp_async_wait_all();
    fence_proxy_async();
    __syncthreads(); /* tile qt landed; every warp is done with the other stage and dS */
    if (qt + 1 < ntiles) {
      const int nx = 1 - st, q1 = q0 + AB_BQ;
      load_tile_sw128<AW_THREADS>(Qs + nx * AW_TILE, qh + head, q1, S, hd);
      load_tile_sw128<AW_THREADS>(dOs + nx * AW_TILE, doh + head, q1, S, hd);
      stage_lse_D<AW_THREADS>(lse_s + nx * AB_BQ, D_s + nx * AB_BQ, lse_bh, D_bh, q1, S);
      cp_async_commit();
    }
    const bf16 *Qb = Qs + st * AW_TILE, *dOb = dOs + st * AW_TILE;
    const float *lse_b = lse_s + st * AB_BQ, *D_b = D_s + st * AB_BQ;

    float sp[8][4], dp[8][4];
    wgmma_fence();
    wgmma_tile_kk(sp, Kw, Qb);
    wgmma_tile_kk(dp, Vw, dOb);
    wgmma_commit_wait();
    dkv_probs(sp, dp, q0, krow, S, lse_b, D_b, scale_log2, qt < qt0 + R || q0 + AB_BQ > S);

    unsigned pa[4][4], pb[4][4];
    acc_to_a(pa, sp);
    acc_to_a(pb, dp);
    /* dS^T's bf16 (dK's operand below) into the warpgroup's tile for dQ:
     * row = key, column = query. Stored before the products are issued: a
     * register an in-flight wgmma reads is not read by anything else. */
    store_dS_tile(dSw, pb);
    fence_proxy_async();
    wgmma_fence();
    issue_dv_dk(dv, dk, pa, pb, dOb, Qb);
    wgmma_commit();
    __syncthreads(); /* both warpgroups' dS^T tiles are in place */
    /* dQ's share dS K over all 128 keys, 16 a k-step in increasing key (the
     * mma.sync kernel's chain), columns 32 wg..32 wg + 31 of it */
    float dq[4][4];
    wgmma_fence();
    issue_dq_share<R>(dq, dSs, Ks, wg);
    wgmma_commit_wait();
    store_dq_partial(dq_partial_slot(part_bh + (dq_pairs_before(qt, R) + kb) * 64 * hd, hd), dq,
                     hd);
  }
  static_assert(2 * 128 * AW_STAGE_LD * sizeof(float) <= (3 * R + 4) * AW_TILE * sizeof(bf16),
                "the staged dK, dV fit in the tiles");
  dkv_store_staged((float *)Ks, dk, dv, dqkv, dqkv_half, b, h, S, nh, hd, k0, scale, rope_cs,
                   half_fp16);
}

/* 1 when this module's code for the running GPU holds the wgmma kernels
 * (sm_90a code loaded), 0 when the driver chose other code */
__device__ int wgmma_compiled_flag;
__global__ void wgmma_compiled_kernel(void) {
  wgmma_compiled_flag = RC_WGMMA_CODE;
}

/* ---- host side ---- */

/* Whether the running GPU loaded this module's sm_90a code (the one code
 * with wgmma; every file of the module is built for the same targets, so the
 * answer holds for CUTLASS's Hopper kernels too): asked once per process. */
bool rc_cuda_sm90a_code(void) {
  static int loaded = -1;
  if (loaded < 0) {
    int host = 0;
    wgmma_compiled_kernel<<<1, 1, 0, rc_cuda_stream()>>>();
    KERNEL_CHECK();
    CUDA_CHECK(cudaStreamSynchronize(rc_cuda_stream()));
    CUDA_CHECK(cudaMemcpyFromSymbol(&host, wgmma_compiled_flag, sizeof host));
    loaded = host == 1;
  }
  return loaded == 1;
}

/* Whether the wgmma path runs: asked once per process (the answer must not
 * change inside a run). RC_CUDA_ATTENTION=mma keeps the mma.sync kernels. */
bool rc_cuda_attention_wgmma_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("RC_CUDA_ATTENTION");
    on = !(e && !strcmp(e, "mma")) && rc_cuda_sm90a_code();
  }
  return on == 1;
}

const char *rc_cuda_attention_path(void) {
  return rc_cuda_attention_wgmma_on() ? "bf16 attention wgmma (hd <= 64), mma.sync"
                                      : "bf16 attention mma.sync";
}

void rc_cuda_attention_wgmma_forward(float *out, float *lse, const uint16_t *heads, int B, int S,
                                     int nh, int hd, uint16_t *out_half, rc_compute half_ct) {
  static bool opted = false;
  const size_t per_part = (size_t)B * nh * S * hd;
  const bf16 *qh = (const bf16 *)heads;
  /* Q, three stages of K and V, and the alignment */
  const size_t sm = (AW_WARPGROUPS + 2 * AW_STAGES) * AW_TILE * sizeof(bf16) + 1024;
  rc_allow_smem(attention_wgmma_forward_kernel, sm, &opted);
  dim3 grid((unsigned int)nh, (unsigned int)B, (unsigned int)((S + AW_BQ - 1) / AW_BQ));
  attention_wgmma_forward_kernel<<<grid, AW_THREADS, sm, rc_cuda_stream()>>>(
      out, lse, qh, qh + per_part, qh + 2 * per_part, S, nh, hd, 1.0f / sqrtf((float)hd), out_half,
      half_ct == RC_COMPUTE_FP16);
  KERNEL_CHECK();
}

/* dK, dV and dQ's partials (in the mma.sync kernel's layout, key blocks of
 * 128: the caller's reduction sums them). The caller made doh, Dd and the
 * partials' buffer. */
void rc_cuda_attention_wgmma_dkv(float *dqkv, float *dq_part, const float *lse, const float *Dd,
                                 const uint16_t *heads, const uint16_t *doh, int B, int S, int nh,
                                 int hd, uint16_t *dqkv_half, const float *rope_cs,
                                 rc_compute half_ct) {
  static bool opted = false;
  const size_t per_part = (size_t)B * nh * S * hd;
  const bf16 *qh = (const bf16 *)heads;
  constexpr int R = AW_DKV_BK / 64;
  static_assert(R == AB_DKV_R, "the partials' layout and reduction are the mma.sync kernel's");
  const int nkb = (S + AW_DKV_BK - 1) / AW_DKV_BK;
  const dim3 grid((unsigned int)nh, (unsigned int)B, (unsigned int)nkb);
  const float scale = 1.0f / sqrtf((float)hd);
  const int fp16 = half_ct == RC_COMPUTE_FP16;
  /* K, V, dS^T: R tiles each; Q, dO: two stages; lse and D */
  const size_t sm = (size_t)(3 * R + 4) * AW_TILE * sizeof(bf16) + 4 * AB_BQ * sizeof(float) + 1024;
  rc_allow_smem(attention_wgmma_dkv_kernel, sm, &opted);
  attention_wgmma_dkv_kernel<<<grid, AW_THREADS, sm, rc_cuda_stream()>>>(
      dqkv, dq_part, lse, Dd, qh, qh + per_part, qh + 2 * per_part, (const bf16 *)doh, S, nh, hd,
      scale, dqkv_half, rope_cs, fp16);
  KERNEL_CHECK();
}
