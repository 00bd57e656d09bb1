/* ops.h — the ops interface: everything the model asks of a backend.
 *
 * The model (src/core) is written once against this struct of function
 * pointers; src/backend/cpu implements it in plain C (the numerical reference
 * and what CI runs), kernels/ implements it in CUDA with cuBLAS. Kernels know
 * no model and do no file I/O.
 *
 * Conventions, binding on every implementation:
 *  - Tensors are float32 (or int32 indices) in backend memory ("device"
 *    pointers), row-major, contiguous unless a leading dimension is given;
 *    the exceptions say so: 16-bit "half" tensors (uint16_t, a compute
 *    type's encoding: cast_half) and e4m3 bytes (uint8_t: cast_e4m3).
 *    T = tokens in a microbatch (micro_batch * seq_len), H = hidden, etc.
 *  - Lower precisions round where ops.h says: a BF16 or FP16 GEMM rounds
 *    both fp32 operands to its compute type itself (to nearest even,
 *    numeric.h) and accumulates in fp32, so callers need not round a copy
 *    first (values already representable pass unchanged); gemm_half takes
 *    operands already encoded, with the same results. A bf16 value held in
 *    an fp32 tensor is one representable in bf16 (numeric.h).
 *  - Deterministic run to run: no atomics in reductions, fixed reduction
 *    orders, fixed GEMM algorithms. Two backends agree within tolerance, not
 *    bitwise (fingerprints, rounding, RNG draws and the initial weights are
 *    bitwise: numeric.h).
 *  - "writes" = output fully overwritten; "+=" = accumulated into, caller
 *    zeroes first. Every output element named as written is written.
 *  - Functions returning a host value synchronise; everything else may be
 *    asynchronous on one stream, in call order.
 */
#ifndef RC_BACKEND_OPS_H
#define RC_BACKEND_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  RC_COMPUTE_FP32 = 0,
  RC_COMPUTE_BF16 = 1, /* inputs are bf16-representable; fp32 accumulate */
  RC_COMPUTE_FP16 = 2  /* inputs are fp16-representable; fp32 accumulate */
} rc_compute;

typedef enum {
  RC_SCORE_SOFTMAX = 0, /* weights = softmax over the selected k logits */
  RC_SCORE_SIGMOID =
      1 /* s = sigmoid(logit); select by s + expert_bias; weights = s / sum(selected s) */
} rc_moe_scoring;

/* One tensor of adamw_many: adamw's arguments that differ between tensors.
 * param_half (NULL: none) also receives the updated param in half_ct's
 * 16-bit form, cast_half's bits: Megatron's copy of the main params (fp32)
 * to the model params (bf16/fp16), made while the update holds them. */
typedef struct {
  float *param, *exp_avg, *exp_avg_sq;
  const float *grad;
  size_t n;
  float weight_decay;
  uint16_t *param_half;
  rc_compute half_ct;
} rc_adamw_tensor;

/* One GEMM of gemm_half_many: gemm_half's arguments that differ between the
 * calls (alpha is 1). C with beta: a gemm_half; C_half (C NULL): a
 * gemm_to_half. */
typedef struct {
  int m, n, k;
  const uint16_t *A, *B;
  int lda, ldb, ldc;
  float beta;
  float *C;
  uint16_t *C_half;
} rc_gemm_half_call;

/* timer_mark slots a backend keeps (ops.h rc_ops timer_mark) */
#define RC_TIMER_SLOTS 8192

typedef struct rc_ops {
  const char *name; /* "cpu", "cuda" */

  /* ---- memory ---- */
  /* zero-filled; NULL when the memory cannot be had, printing nothing (the
   * caller names the buffer and reports exit 75) */
  void *(*alloc)(size_t bytes);
  /* Whether an op could not allocate its own scratch since the process
   * started: ops return no status, so such an op skips its work and the
   * failure waits here (the first one: its size and what asked for it). The
   * model asks after every microbatch and stops the step (exit 75) before
   * anything is traced or saved. 0: none; 1: the allocator refused; 2:
   * RC_TEST_FAIL_ALLOC_AT made it fail (base/alloc_fail.h). */
  int (*alloc_failed)(size_t *bytes, char *what, size_t cap);
  void (*free)(void *ptr);
  /* to_device returns once src_host may be reused; the copy is ordered
   * before every later op (on a GPU it may still be in flight) */
  void (*to_device)(void *dst, const void *src_host, size_t bytes);
  void (*to_host)(void *dst_host, const void *src, size_t bytes);
  void (*copy)(void *dst, const void *src, size_t bytes);
  void (*zero)(void *dst, size_t bytes);
  /* zero for each of count buffers (dst[i], bytes[i] bytes; none overlapping),
   * in one launch where a backend can: a step's main_grad buffers, a memset
   * each, were ~100 launches a step */
  void (*zero_many)(void *const *dst, const size_t *bytes, int count);
  void (*sync)(void);
  /* Timestamps for the per-op profiler's unsynchronised mode
   * (backend/ops_profile.h): timer_mark(slot) queues a timestamp behind the
   * work already issued (on a GPU an event on the backend's stream; on the
   * CPU, whose ops are done when they return, the clock now), slot in
   * [0, RC_TIMER_SLOTS); timer_seconds(from, to) waits for both and returns
   * the seconds between them. Nothing else uses them. */
  void (*timer_mark)(int slot);
  double (*timer_seconds)(int from, int to);
  /* Host memory for staging checkpoint bytes (contents unspecified: every
   * byte is written before it is read), NULL when there is none; freed with
   * host_free(ptr, bytes). With page_locked, and where the backend can,
   * page-locked: to_host and to_device into and out of it then run at the
   * link's speed, without bounce copies. Locking gigabytes takes the driver
   * about a second, during which the process's other CUDA calls stall: ask
   * for it only while nothing else runs on the device. */
  void *(*host_alloc)(size_t bytes, int page_locked);
  void (*host_free)(void *ptr, size_t bytes);

  /* ---- GEMM ----
   * C[m,n] = alpha * op(A) @ op(B) + beta * C, row-major, op(X) = X or X^T,
   * with A and B rounded to ct first (BF16/FP16; FP32 uses them as they are).
   * A is [m,k] (or [k,m] if trans_a) with row stride lda; B is [k,n] (or
   * [n,k] if trans_b) with row stride ldb; C has row stride ldc.
   * The product is accumulated fully (fp32, fixed order) and only then
   * combined: beta == 0 gives alpha*acc and never reads C (NaN in C is
   * ignored); beta == 1 gives alpha*acc + C. So a beta=1 GEMM is bitwise
   * equal to a beta=0 GEMM into scratch followed by `add` — the fusion-off
   * arm must match the fusion-on arm. k == 0 gives acc = 0. */
  void (*gemm)(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

  /* ---- bf16/fp16 storage: what the tensor cores read, kept once ----
   * A "half" tensor is ct's 16-bit encoding (numeric.h rc_bf16_encode /
   * rc_fp16_encode), 2 bytes an element: the form in which a linear keeps its
   * weight copy, the input it saves for the weight gradient and the output
   * gradient both backward GEMMs read, so that no GEMM converts an fp32
   * operand again (docs/cuda-backend.md, "Half operands").
   * cast_half: dst[i] = encode(round(src[i]) to ct), ct BF16 or FP16. */
  void (*cast_half)(uint16_t *dst, const float *src, size_t n, rc_compute ct);
  /* gemm with A and B given in ct's encoding (BF16 or FP16, strides in
   * elements): bitwise what gemm(ct, ...) gives on the decoded fp32 values,
   * beta and k == 0 included. */
  void (*gemm_half)(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                    int ldc);
  /* C = R + op(A) op(B) (alpha 1; half operands as gemm_half), R [m, n] with
   * C's row stride ldc, not overlapping C: a residual connection in the
   * GEMM's epilogue. Bitwise gemm_half with beta 0 into C followed by
   * add(C, R, C): the product is accumulated fully, then added once. */
  void (*gemm_half_residual)(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                             const uint16_t *A, int lda, const uint16_t *B, int ldb, const float *R,
                             float *C, int ldc);
  /* C = A B (alpha 1, beta 0; half operands as gemm_half) stored in ct's
   * 16-bit encoding: each element the fp32 accumulator rounded to nearest
   * even, as a bf16/fp16 layer's output is (the output head's logits). The
   * CPU: bitwise cast_half of its gemm_half. The GPU: the rounding of its
   * own algorithm's fp32 result for this key (a 16-bit output is a key of
   * its own, so within tolerance of gemm_half, not bitwise). k == 0 gives
   * zeros. */
  void (*gemm_to_half)(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                       const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                       int ldc);
  /* count GEMMs of one compute type and one pair of transposes: the expert
   * GEMMs of a grouped (MoE) linear, their row counts in m (k when trans_a:
   * the weight gradient). Each is the gemm_half (alpha 1) or gemm_to_half
   * call it describes, up to the GEMM algorithm: a backend may choose it for
   * the call's row counts together (the GPU buckets them around the rows per
   * group, so that rare loads do not bring new kernels), giving the calls'
   * results within gemm_half's tolerance; the same calls give the same bits.
   * The CPU: bitwise its calls one by one. No call may write what another
   * reads or writes, so they may run in any order. */
  void (*gemm_half_many)(rc_compute ct, bool trans_a, bool trans_b, const rc_gemm_half_call *calls,
                         int count);

  /* ---- FP8 (E4M3), the tensor-core form Transformer Engine uses ----
   * Bytes are rc_e4m3_encode's (numeric.h). A scaled cast and a GEMM on the
   * bytes: with per-tensor scales s_a and s_b the caller passes
   * alpha = 1 / (s_a * s_b) to get the unscaled product back.
   *
   * cast_e4m3: dst[r, c] = rc_e4m3_encode(src[r, c] * scale) for a rows x cols
   * row-major src (row stride ld_src), into dst with row stride ld_dst bytes
   * (writes every byte of the rows; columns cols..ld_dst-1 become 0, so a
   * GEMM's k can be padded with zeros). transpose: dst[c, r] instead, dst
   * then cols rows of ld_dst >= rows bytes, columns rows..ld_dst-1 zero. */
  void (*cast_e4m3)(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                    float scale, bool transpose);
  /* C[m,n] = alpha * A[m,k] . B[n,k]^T + beta * C (the TN form FP8 tensor
   * cores take: both operands k-contiguous), A and B e4m3 bytes, contiguous
   * (row stride k), k a multiple of 16, both 16-byte aligned. Products are
   * exact; the sum is accumulated in fp32 in a fixed order (the device's
   * tensor cores order it differently from the CPU: backends agree within
   * tolerance). beta as in gemm: 0 never reads C, 1 is bitwise
   * beta-0-into-scratch then `add`. */
  void (*gemm_e4m3)(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                    float beta, float *C, int ldc);
  /* amax[0] = max(amax[0], max |x|) without a host round trip (a max is
   * exact in any order); NaN in x (or already in amax[0]) leaves NaN. */
  void (*amax_update)(float *amax, const float *x, size_t n);

  /* ---- elementwise and reductions ---- */
  /* dst[i] = round(src[i]) to ct (FP32: copy). dst may equal src. */
  void (*round_to)(float *dst, const float *src, size_t n, rc_compute ct);
  float (*amax)(const float *x, size_t n); /* max |x|; NaN if any NaN */
  void (*add)(float *out, const float *a, const float *b,
              size_t n);                      /* out = a + b; out may alias */
  void (*scale)(float *x, float s, size_t n); /* x *= s */
  void (*copy2d)(float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);
  double (*sum)(const float *x, size_t n);   /* fixed order; result deterministic */
  double (*sumsq)(const float *x, size_t n); /* fixed order, accumulated in double */
  long (*count_nonfinite)(const float *x, size_t n);
  uint64_t (*fingerprint)(const void *x, size_t nbytes); /* numeric.h definition, nbytes % 4 == 0 */
  /* Batched forms: out[i] = sumsq(x[i], n[i]) and out[i] = fingerprint(x[i], nbytes[i]) for i <
   * count, bit for bit what the single calls return, with one host synchronisation for all. On a
   * GPU each synchronising call is a device round trip, and a step takes a sum of squares and
   * four fingerprints of every parameter (1305 calls at gpu-small). */
  void (*sumsq_many)(double *out, const float *const *x, const size_t *n, int count);
  void (*fingerprint_many)(uint64_t *out, const void *const *x, const size_t *nbytes, int count);

  /* ---- layers ---- */
  /* out[t,:] = table[ids[t],:] (writes). */
  void (*embedding_forward)(float *out, const int32_t *ids, const float *table, int T, int H);
  /* dtable[v,:] += sum over t with ids[t]==v, in increasing t, of dout[t,:]. No atomics. */
  void (*embedding_backward)(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                             int V);
  /* rstd[t] = 1/sqrt(mean(x[t]^2) + eps); out = x * rstd * w (writes out, rstd).
   * out_half (may be NULL): the output also in ct's 16-bit encoding, bitwise
   * cast_half of out, for a half linear's saved input; out may then be NULL
   * (only out_half written). The same for swiglu's out_half and din_half.
   * out_half's rows are ld_half >= H elements apart (H: contiguous; 2H: one
   * half of a concatenation, as the MTP depth's [embedding | hidden] input
   * of eh_proj); the elements between rows are left alone. */
  void (*rmsnorm_forward)(float *out, float *rstd, const float *x, const float *w, int T, int H,
                          float eps, uint16_t *out_half, int ld_half, rc_compute ct);
  /* dx += d/dx (dx_accumulate), or dx = 0.0f + d/dx, the same values as
   * zeroing dx first, without reading it; dw += sum over t (fixed order) of
   * d/dw. dx_half (may be
   * NULL): the updated dx also in ct's 16-bit encoding, bitwise cast_half of
   * it, for the half linear whose output gradient it is (the residual
   * stream's gradient, which an fc2, proj or eh_proj backward would cast).
   * dout's rows are ld_dout >= H elements apart (H: contiguous; 2H: one half
   * of the MTP concatenation's gradient). */
  void (*rmsnorm_backward)(float *dx, float *dw, const float *dout, const float *x, const float *w,
                           const float *rstd, int T, int H, int ld_dout, uint16_t *dx_half,
                           rc_compute ct, bool dx_accumulate);
  /* qkv is [B*S, 3*nh*hd] = [q | k | v], head h of q at columns h*hd..(h+1)*hd.
   * Rotates q and k in place by position s (0..S-1) in each sequence, pairs
   * (2i, 2i+1) with angle s * theta^(-2i/hd) (GPT-NeoX "interleaved" RoPE).
   * rope_backward applies the inverse rotation (to dq, dk in a dqkv buffer).
   * heads (may be NULL): the BF16 attention's operands of the rotated qkv,
   * [3][B][nh][S][hd] (q, k, v; each element rc_bf16_encode of the rotated
   * value), which attention_forward/backward then read instead of qkv; qkv
   * itself is left unspecified (the CUDA backend writes only heads).
   * qkv_half (may be NULL; with heads only): the un-rotated qkv in half_ct's
   * 16-bit encoding (a half qkv linear's gemm_to_half output, rounded once as
   * a bf16/fp16 layer's output is: Megatron-LM's QKV projection hands RoPE a
   * bf16 tensor), read instead of qkv: heads are then those of its decoded
   * values, bitwise, and qkv (not NULL) is scratch the backend may write.
   * dqkv_half (may be NULL): the rotated dqkv in ct's 16-bit encoding,
   * bitwise cast_half of it, for a half qkv linear; dqkv is then left
   * unspecified. One pass instead of a rotation and a cast (or a rotation and
   * the attention's own rounding into heads). */
  void (*rope_forward)(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                       int nh, int hd, float theta, uint16_t *heads);
  void (*rope_backward)(float *dqkv, int B, int S, int nh, int hd, float theta, uint16_t *dqkv_half,
                        rc_compute ct);
  /* Causal softmax attention, scale 1/sqrt(hd).
   * out [B*S, nh*hd] (writes), lse [B, nh, S] log-sum-exp of the scaled scores (writes).
   * ct says where the products may round (the attention precision, a config
   * setting of its own, because it changes the numerics of every run):
   *   FP32  fp32 throughout.
   *   BF16  the tensor-core contract (FlashAttention's): q, k, v and dout are
   *         rounded to bf16; the probabilities P are rounded to bf16 before
   *         P V and P^T dout, and dS = P (dP - D) before dS K and dS^T Q; every
   *         product accumulates in fp32; softmax statistics (max, sum, lse) and
   *         D = rowsum(bf16(dout) * bf16(out)) stay fp32 (out rounded, as
   *         FlashAttention keeps O in bf16). Needs hd % 16 == 0, hd <= 128.
   * Only FP32 and BF16 are valid. heads (BF16 only; may be NULL): rope_forward's
   * bf16 heads of the same qkv, read instead of it (qkv may then be NULL);
   * bitwise the results from qkv, whose rounding they are. out_half (may be
   * NULL): out also in half_ct's 16-bit encoding, bitwise cast_half of out,
   * for a half out-projection's saved input; with BF16, out may then be NULL
   * (only out_half written). */
  void (*attention_forward)(rc_compute ct, float *out, float *lse, const float *qkv,
                            const uint16_t *heads, int B, int S, int nh, int hd, uint16_t *out_half,
                            rc_compute half_ct);
  /* dqkv [B*S, 3*nh*hd] (writes), from dout, the forward's out/lse and qkv
   * (post-RoPE) or its heads, as in attention_forward. out_bf16 (BF16 only;
   * may be NULL): out's bf16 encoding (a forward's out_half with half_ct
   * BF16), read instead of out, which may then be NULL: bitwise the results
   * from out, since D reads out rounded to bf16 either way. dqkv_half (may
   * be NULL): instead of dqkv, rope_backward's 16-bit gradient of it, for a
   * half qkv linear — bitwise this call into dqkv followed by
   * rope_backward(dqkv, B, S, nh, hd, rope_theta, dqkv_half, half_ct), with
   * half_ct BF16 or FP16; dqkv is then left unspecified (may be NULL). */
  void (*attention_backward)(rc_compute ct, float *dqkv, const float *dout, const float *out,
                             const float *lse, const float *qkv, const uint16_t *heads, int B,
                             int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                             uint16_t *dqkv_half, rc_compute half_ct);
  /* in [T, 2F] = [gate | up]; out[t,j] = silu(gate)*up (writes). in NULL:
   * the input is in_half, ct's 16-bit encoding (a half fc1's output,
   * gemm_to_half), decoded exactly; else in_half is ignored. */
  void (*swiglu_forward)(float *out, const float *in, const uint16_t *in_half, int T, int F,
                         uint16_t *out_half, rc_compute ct);
  /* din (writes) from dout and the forward's input as swiglu_forward takes
   * it. out_half (may be NULL): the forward's output recomputed, bitwise
   * swiglu_forward's out_half of the same input, for a half fc2 whose saved
   * input is recomputed in the backward instead of kept (the values are read
   * here anyway: one write, not a second pass). */
  void (*swiglu_backward)(float *din, const float *dout, const float *in, const uint16_t *in_half,
                          int T, int F, uint16_t *din_half, uint16_t *out_half, rc_compute ct);
  /* Softmax cross-entropy over logits [T, V]. Writes losses[t] = -log p[label],
   * correct[t] = 1.0f if argmax (lowest index among ties) == label else 0.0f,
   * and the gradient dloss[t] * (softmax - onehot): with dlogits_half NULL over
   * the logits in place; else into dlogits_half [T, V] in ct's 16-bit
   * encoding (BF16/FP16, bitwise cast_half of the in-place values; the
   * logits are then left unspecified). logits NULL: the logits are
   * dlogits_half's 16-bit values (a 16-bit head's output, gemm_to_half),
   * decoded exactly, and the gradient replaces them there. Rows with
   * dloss[t] == 0 become all zeros. labels in [0, V). */
  void (*cross_entropy)(float *losses, float *correct, float *logits, const int32_t *labels,
                        const float *dloss, int T, int V, uint16_t *dlogits_half, rc_compute ct);
  /* x[i] = keep(i) ? x[i] / (1-p) : 0, keep from rc_dropout_keep(seed, offset, i, p).
   * The same call with the same (seed, offset) is dropout's backward. */
  void (*dropout)(float *x, size_t n, float p, uint64_t seed, uint64_t offset);

  /* ---- initialisation ----
   * dst[j] = rc_init_normal(key, first + j, std) for j < n (writes): element
   * first + j of a parameter's N(0, std) draws (numeric.h: Box-Muller on
   * element pair i & ~1, with numeric.h's own log, sin and cos). Any first,
   * odd included; an element's value depends on (key, index, std) only, not
   * on first, n or how the backend splits the work. Bitwise on every
   * backend, like fingerprints and dropout: a CPU leg and a CUDA leg start
   * from the same weights. */
  void (*init_normal)(float *dst, size_t n, uint64_t first, uint64_t key, float std);

  /* ---- mixture of experts ----
   * Router: logits [T, E] (fp32). Writes topk_idx [T, k] and topk_w [T, k],
   * selected by score (softmax: the logit; sigmoid: sigmoid(logit) +
   * expert_bias[e]) descending, ties to the lower expert index, slot order =
   * rank order; and probs [T, E], the full normalised distribution used by the
   * load-balancing loss (softmax of logits; or sigmoid(l)/sum_e sigmoid(l)).
   * expert_bias may be NULL (treated as 0). */
  void (*moe_route)(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                    const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring);
  /* dlogits [T, E] (writes) from dtopk_w [T, k] (through the selected weights)
   * and dprobs_e [E] (d loss / d probs[t,e], the same for every t). */
  void (*moe_route_backward)(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                             const float *logits, const int32_t *topk_idx, const float *topk_w,
                             const float *probs, int T, int E, int k, rc_moe_scoring scoring);
  /* Stable permutation of the T*k (token, slot) pairs by expert: entries
   * ordered by (expert, token, slot). Writes perm [T*k] (perm[i] = t*k + s),
   * inv_perm [T*k] (inv_perm[t*k+s] = i) and offsets [E+1] (device int32;
   * expert e owns rows offsets[e]..offsets[e+1]). */
  void (*moe_permute)(int32_t *perm, int32_t *inv_perm, int32_t *offsets, const int32_t *topk_idx,
                      int T, int E, int k);
  /* dst[i,:] = src[perm[i] / k, :] for i < T*k (writes); dst_half (ct's
   * 16-bit form; dst NULL, or both): those rows as cast_half encodes them, the
   * input a half linear reads, so no fp32 copy need exist. */
  void (*moe_gather)(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                     uint16_t *dst_half, rc_compute ct);
  /* out[t,:] (writes) = sum over s = 0..k-1 in order of w[t,s] * rows[inv_perm[t*k+s], :];
   * w == NULL means weight 1 (the backward's scatter of token gradients). residual (may be
   * NULL; never out itself): out = residual + that sum, add's one rounding (add(out,
   * residual, sum)'s bits). */
  void (*moe_combine)(float *out, const float *rows, const float *w, const int32_t *inv_perm, int T,
                      int k, int H, const float *residual);
  /* Backward of moe_combine with weights: drows[inv_perm[t*k+s],:] = w[t,s]*dout[t,:]
   * (writes all T*k rows), dw[t,s] = dot(dout[t,:], rows[inv_perm[t*k+s],:]) (writes). */
  void (*moe_combine_backward)(float *drows, float *dw, const float *dout, const float *rows,
                               const float *w, const int32_t *inv_perm, int T, int k, int H);

  /* ---- optimizer ----
   * AdamW, one tensor, in place. g = grad * grad_scale (unscale and clip in one
   * factor); m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
   * p -= lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p ),
   * bc1 = 1 - b1^step, bc2 = 1 - b2^step (computed by the caller in double,
   * passed as float). */
  void (*adamw)(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                float bias_correction1, float bias_correction2);
  /* adamw on every tensor ts[0..count) (each with its own weight decay), and
   * the fingerprints (as `fingerprint`) of each tensor's grad and of its
   * param, exp_avg and exp_avg_sq after the update: fp[4 i + 0..3] (host).
   * The same bits as adamw and four fingerprint calls per tensor, in one pass
   * over the four tensors instead of five; and where a tensor has a
   * param_half, the same bits as a cast_half of its updated param. */
  void (*adamw_many)(const rc_adamw_tensor *ts, int count, float lr, float beta1, float beta2,
                     float eps, float grad_scale, float bias_correction1, float bias_correction2,
                     uint64_t *fp);
} rc_ops;

/* Backends. rc_cuda_ops() returns NULL when built without CUDA or when no GPU
 * is usable (then *why, if non-NULL, says why). */
const rc_ops *rc_cpu_ops(void);
const rc_ops *rc_cuda_ops(const char **why);

/* The name of the first member of *ops that is NULL, or NULL when every
 * member is set (ops_check.c). Checked where a table is received (the CPU
 * table, the CUDA module's), so a table with a hole is refused with its
 * name rather than crashing at the first call of the missing op. */
const char *rc_ops_missing(const rc_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
