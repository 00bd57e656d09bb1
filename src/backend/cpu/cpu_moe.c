/* cpu_moe.c — the CPU mixture-of-experts ops: routing and its backward, the
 * stable permutation by expert, gather, and the weighted combine.
 *
 * Everything is in a fixed order so that token-to-expert placement and the
 * per-token sums never depend on anything but the inputs: top-k breaks ties
 * to the lower expert index, the permutation is a stable counting sort, and
 * the combine sums slots in slot order. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/* Top k of score[0..E) by (value desc, index asc) into idx[0..k): repeated
 * passes for the best unchosen expert; k and E are small. */
static void topk(int32_t *idx, const float *score, int E, int k) {
  for (int s = 0; s < k; s++) {
    int best = -1;
    for (int e = 0; e < E; e++) {
      int taken = 0;
      for (int r = 0; r < s; r++) taken |= idx[r] == e;
      if (taken) continue;
      if (best < 0 || score[e] > score[best]) best = e; /* strict: ties keep the lower index */
    }
    idx[s] = best;
  }
}

void rc_cpu_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                      const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring) {
  float *score = rc_cpu_scratch((size_t)E * sizeof(float));
  for (int t = 0; t < T; t++) {
    const float *l = logits + (size_t)t * E;
    int32_t *idx = topk_idx + (size_t)t * k;
    float *w = topk_w + (size_t)t * k, *p = probs + (size_t)t * E;
    if (scoring == RC_SCORE_SIGMOID) {
      float total = 0.0f;
      for (int e = 0; e < E; e++) {
        p[e] = sigmoidf(l[e]);
        score[e] = p[e] + (expert_bias ? expert_bias[e] : 0.0f);
        total += p[e];
      }
      topk(idx, score, E, k);
      float sel = 0.0f;
      for (int s = 0; s < k; s++) sel += p[idx[s]];
      for (int s = 0; s < k; s++) w[s] = p[idx[s]] / sel;
      for (int e = 0; e < E; e++) p[e] /= total; /* p held sigmoid(l) until here */
    } else {
      topk(idx, l, E, k);
      /* softmax over the selected logits; slot 0 holds their maximum */
      float sel = 0.0f;
      for (int s = 0; s < k; s++) {
        w[s] = expf(l[idx[s]] - l[idx[0]]);
        sel += w[s];
      }
      for (int s = 0; s < k; s++) w[s] /= sel;
      float mx = l[0];
      for (int e = 1; e < E; e++)
        if (l[e] > mx) mx = l[e];
      float total = 0.0f;
      for (int e = 0; e < E; e++) {
        p[e] = expf(l[e] - mx);
        total += p[e];
      }
      for (int e = 0; e < E; e++) p[e] /= total;
    }
  }
  free(score);
}

/* The selection itself is piecewise constant, so gradients flow only through
 * the weights and probs.
 *
 * Softmax: w_r = softmax over selected logits, dw_r/dl_{i_q} = w_r (d_rq - w_q),
 * so dl_{i_q} = w_q (dw_q - sum_r dw_r w_r); likewise for probs over all E,
 * dl_e = p_e (dp_e - sum_j dp_j p_j).
 *
 * Sigmoid: with s_e = sigmoid(l_e), Z = sum of selected s, A = sum of all s,
 * w_r = s_{i_r} / Z gives ds_{i_q} = (dw_q - sum_r dw_r w_r) / Z and
 * p_e = s_e / A gives ds_e = (dp_e - sum_j dp_j p_j) / A; then
 * dl_e = ds_e s_e (1 - s_e). The bias only selects and gets no gradient. */
void rc_cpu_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                               const float *logits, const int32_t *topk_idx, const float *topk_w,
                               const float *probs, int T, int E, int k, rc_moe_scoring scoring) {
  float *sg = rc_cpu_scratch((size_t)E * sizeof(float));
  for (int t = 0; t < T; t++) {
    const float *l = logits + (size_t)t * E, *p = probs + (size_t)t * E;
    const float *w = topk_w + (size_t)t * k, *dw = dtopk_w + (size_t)t * k;
    const int32_t *idx = topk_idx + (size_t)t * k;
    float *dl = dlogits + (size_t)t * E;

    float wdot = 0.0f, pdot = 0.0f; /* sum_r dw_r w_r, sum_j dp_j p_j */
    for (int s = 0; s < k; s++) wdot += dw[s] * w[s];
    for (int e = 0; e < E; e++) pdot += dprobs_e[e] * p[e];

    if (scoring == RC_SCORE_SIGMOID) {
      float all = 0.0f, sel = 0.0f;
      for (int e = 0; e < E; e++) {
        sg[e] = sigmoidf(l[e]);
        all += sg[e];
      }
      for (int s = 0; s < k; s++) sel += sg[idx[s]];
      /* dl[e] holds ds_e until the final sigmoid chain rule */
      for (int e = 0; e < E; e++) dl[e] = (dprobs_e[e] - pdot) / all;
      for (int s = 0; s < k; s++) dl[idx[s]] += (dw[s] - wdot) / sel;
      for (int e = 0; e < E; e++) dl[e] *= sg[e] * (1.0f - sg[e]);
    } else {
      for (int e = 0; e < E; e++) dl[e] = p[e] * (dprobs_e[e] - pdot);
      for (int s = 0; s < k; s++) dl[idx[s]] += w[s] * (dw[s] - wdot);
    }
  }
  free(sg);
}

/* Counting sort by expert; scanning (token, slot) in order keeps it stable. */
void rc_cpu_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets, const int32_t *topk_idx,
                        int T, int E, int k) {
  memset(offsets, 0, (size_t)(E + 1) * sizeof(int32_t));
  size_t n = (size_t)T * k;
  for (size_t i = 0; i < n; i++) offsets[topk_idx[i] + 1]++;
  for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
  int32_t *cursor = rc_cpu_scratch((size_t)(E + 1) * sizeof(int32_t));
  memcpy(cursor, offsets, (size_t)(E + 1) * sizeof(int32_t));
  for (size_t i = 0; i < n; i++) {
    int32_t pos = cursor[topk_idx[i]]++;
    perm[pos] = (int32_t)i;
    inv_perm[i] = pos;
  }
  free(cursor);
}

void rc_cpu_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H) {
  size_t n = (size_t)T * k;
  for (size_t i = 0; i < n; i++)
    memcpy(dst + i * H, src + (size_t)(perm[i] / k) * H, (size_t)H * sizeof(float));
}

/* The sum starts from slot 0's term rather than from zero so that a single
 * slot is passed through exactly (0 + -0.0 would give +0.0). */
void rc_cpu_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                        int T, int k, int H) {
  for (int t = 0; t < T; t++) {
    float *o = out + (size_t)t * H;
    if (k <= 0) {
      memset(o, 0, (size_t)H * sizeof(float));
      continue;
    }
    for (int s = 0; s < k; s++) {
      const float *r = rows + (size_t)inv_perm[(size_t)t * k + s] * H;
      float ws = w ? w[(size_t)t * k + s] : 1.0f;
      for (int j = 0; j < H; j++) {
        float term = w ? ws * r[j] : r[j];
        o[j] = s == 0 ? term : o[j] + term;
      }
    }
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
