/* cpu_moe.c — the CPU mixture-of-experts ops: routing and its backward, the
 * stable permutation by expert, gather, and the weighted combine.
 *
 * Everything is in a fixed order so that token-to-expert placement and the
 * per-token sums never depend on anything but the inputs: top-k breaks ties
 * to the lower expert index, the permutation is a stable counting sort, and
 * the combine sums slots in slot order. Routing's arithmetic per token is
 * backend/element_math.h's, which the CUDA kernels call too. */
#include "backend/cpu/cpu_internal.h"
#include "backend/element_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One token at a time; the arithmetic is backend/element_math.h's. */
void rc_cpu_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                      const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring) {
  for (int t = 0; t < T; t++)
    rc_moe_route_token(topk_idx + (size_t)t * k, topk_w + (size_t)t * k, probs + (size_t)t * E,
                       logits + (size_t)t * E, expert_bias, E, k, scoring == RC_SCORE_SIGMOID);
}

/* The derivation is at rc_moe_route_backward_token. */
void rc_cpu_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                               const float *logits, const int32_t *topk_idx, const float *topk_w,
                               const float *probs, int T, int E, int k, rc_moe_scoring scoring) {
  for (int t = 0; t < T; t++)
    rc_moe_route_backward_token(dlogits + (size_t)t * E, dtopk_w + (size_t)t * k, dprobs_e,
                                logits + (size_t)t * E, topk_idx + (size_t)t * k,
                                topk_w + (size_t)t * k, probs + (size_t)t * E, E, k,
                                scoring == RC_SCORE_SIGMOID);
}

/* Counting sort by expert; scanning (token, slot) in order keeps it stable. */
void rc_cpu_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets, const int32_t *topk_idx,
                        int T, int E, int k) {
  memset(offsets, 0, (size_t)(E + 1) * sizeof(int32_t));
  size_t n = (size_t)T * k;
  for (size_t i = 0; i < n; i++) offsets[topk_idx[i] + 1]++;
  for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
  int32_t *cursor = rc_cpu_scratch((size_t)(E + 1) * sizeof(int32_t), "moe_permute");
  if (!cursor) return; /* recorded: the step stops (cpu_internal.h) */
  memcpy(cursor, offsets, (size_t)(E + 1) * sizeof(int32_t));
  for (size_t i = 0; i < n; i++) {
    int32_t pos = cursor[topk_idx[i]]++;
    perm[pos] = (int32_t)i;
    inv_perm[i] = pos;
  }
  free(cursor);
}

void rc_cpu_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                       uint16_t *dst_half, rc_compute ct) {
  size_t n = (size_t)T * k;
  for (size_t i = 0; i < n; i++) {
    const float *from = src + (size_t)(perm[i] / k) * H;
    if (dst) memcpy(dst + i * H, from, (size_t)H * sizeof(float));
    if (dst_half) rc_cpu_cast_half(dst_half + i * H, from, (size_t)H, ct);
  }
}

/* The sum starts from slot 0's term rather than from zero so that a single
 * slot is passed through exactly (0 + -0.0 would give +0.0). */
void rc_cpu_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                        int T, int k, int H, const float *residual) {
  for (int t = 0; t < T; t++) {
    float *o = out + (size_t)t * H;
    if (k <= 0) {
      memset(o, 0, (size_t)H * sizeof(float));
    } else {
      for (int s = 0; s < k; s++) {
        const float *r = rows + (size_t)inv_perm[(size_t)t * k + s] * H;
        float ws = w ? w[(size_t)t * k + s] : 1.0f;
        for (int j = 0; j < H; j++) {
          float term = w ? ws * r[j] : r[j];
          o[j] = s == 0 ? term : o[j] + term;
        }
      }
    }
    if (residual) /* as add(out, residual, out): residual first */
      for (int j = 0; j < H; j++) o[j] = residual[(size_t)t * H + j] + o[j];
  }
}

void rc_cpu_moe_combine_backward(float *drows, float *dw, const float *dout, const float *rows,
                                 const float *w, const int32_t *inv_perm, int T, int k, int H) {
  for (int t = 0; t < T; t++) {
    const float *g = dout + (size_t)t * H;
    for (int s = 0; s < k; s++) {
      size_t ts = (size_t)t * k + s;
      const float *r = rows + (size_t)inv_perm[ts] * H;
      float *dr = drows + (size_t)inv_perm[ts] * H;
      float ws = w ? w[ts] : 1.0f;
      float acc = 0.0f;
      for (int j = 0; j < H; j++) {
        dr[j] = w ? ws * g[j] : g[j];
        acc += g[j] * r[j];
      }
      if (dw) dw[ts] = acc;
    }
  }
}
