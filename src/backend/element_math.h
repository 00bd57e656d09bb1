/* element_math.h — the per-element arithmetic of the model's ops, written
 * once for both backends: sigmoid, SwiGLU forward and backward, MoE routing
 * of one token and its backward, and the AdamW update of one element.
 *
 * The CPU loops (backend/cpu/) and the CUDA kernels (kernels/) call these
 * functions, so the order and grouping of every float operation is the same
 * text on both sides and cannot drift apart. Both are compiled without
 * contraction (C: -ffp-contract=off, CUDA: --fmad=false, CMakeLists.txt),
 * so a*b+c rounds twice on each backend. What may still differ is the
 * library's expf (the GPU's is not correctly rounded): ops using it are
 * compared within a tolerance by tests/test_cuda_ops.c, AdamW (sqrtf and
 * IEEE division only) bit for bit. The CPU is the numerical reference: the
 * expressions here are the CPU backend's, operation for operation. */
#ifndef RC_BACKEND_ELEMENT_MATH_H
#define RC_BACKEND_ELEMENT_MATH_H

#include "backend/numeric.h"

/* sigmoid(x) = 1 / (1 + exp(-x)) */
RC_HD float rc_sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/* ---- SwiGLU: out = silu(g) u, silu(g) = g sigmoid(g) ---- */

RC_HD float rc_swiglu_forward_element(float g, float u) {
  return g * rc_sigmoidf(g) * u;
}

/* d silu(g)/dg = sig(g) (1 + g (1 - sig(g))), grouped left to right as
 * ((d u) sig) (1 + g (1 - sig)) and (d g) sig. */
RC_HD void rc_swiglu_backward_element(float *dg, float *du, float g, float u, float d) {
  float sg = rc_sigmoidf(g);
  *dg = d * u * sg * (1.0f + g * (1.0f - sg));
  *du = d * g * sg;
}

/* ---- MoE routing of one token over E experts (k and E are small) ---- */

/* Top k by (score desc, index asc) into idx[0..k): repeated passes for the
 * best unchosen expert. The score of expert e is v[e] + bias[e] (a missing
 * bias adds 0) when add_bias, else v[e]; it is recomputed, not stored, so
 * that no per-token scratch is needed on the device. */
RC_HD void rc_moe_topk(int32_t *idx, const float *v, const float *bias, int add_bias, int E,
                       int k) {
  for (int s = 0; s < k; s++) {
    int best = -1;
    float best_score = 0.0f;
    for (int e = 0; e < E; e++) {
      int taken = 0;
      for (int r = 0; r < s; r++) taken |= idx[r] == e;
      if (taken) continue;
      float se = add_bias ? v[e] + (bias ? bias[e] : 0.0f) : v[e];
      if (best < 0 || se > best_score) { /* strict: ties keep the lower index */
        best = e;
        best_score = se;
      }
    }
    idx[s] = best;
  }
}

/* One token: l[E] logits in; idx[k], w[k] (routing weights) and p[E] (the
 * load-balancing probabilities) out. Sigmoid scoring (DeepSeek-V3): s =
 * sigmoid(l), select by s + bias, w = s / sum(selected s), p = s / sum(s).
 * Softmax: select by l, w = softmax over the selected logits, p = softmax
 * over all E. */
RC_HD void rc_moe_route_token(int32_t *idx, float *w, float *p, const float *l, const float *bias,
                              int E, int k, int sigmoid_scoring) {
  if (sigmoid_scoring) {
    float total = 0.0f;
    for (int e = 0; e < E; e++) {
      p[e] = rc_sigmoidf(l[e]);
      total += p[e];
    }
    rc_moe_topk(idx, p, bias, 1, E, k);
    float sel = 0.0f;
    for (int s = 0; s < k; s++) sel += p[idx[s]];
    for (int s = 0; s < k; s++) w[s] = p[idx[s]] / sel;
    for (int e = 0; e < E; e++) p[e] /= total; /* p held sigmoid(l) until here */
  } else {
    rc_moe_topk(idx, l, 0, 0, E, k);
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

/* The backward of one token. The selection is piecewise constant, so
 * gradients flow only through the weights and probs.
 *
 * Softmax: w_r = softmax over selected logits, dw_r/dl_{i_q} = w_r (d_rq - w_q),
 * so dl_{i_q} = w_q (dw_q - sum_r dw_r w_r); likewise for probs over all E,
 * dl_e = p_e (dp_e - sum_j dp_j p_j).
 *
 * Sigmoid: with s_e = sigmoid(l_e), Z = sum of selected s, A = sum of all s,
 * w_r = s_{i_r} / Z gives ds_{i_q} = (dw_q - sum_r dw_r w_r) / Z and
 * p_e = s_e / A gives ds_e = (dp_e - sum_j dp_j p_j) / A; then
 * dl_e = ds_e s_e (1 - s_e). The bias only selects and gets no gradient.
 * dp is the gradient of the probs, one [E] vector shared by all tokens. */
RC_HD void rc_moe_route_backward_token(float *dl, const float *dw, const float *dp, const float *l,
                                       const int32_t *idx, const float *w, const float *p, int E,
                                       int k, int sigmoid_scoring) {
  float wdot = 0.0f, pdot = 0.0f; /* sum_r dw_r w_r, sum_j dp_j p_j */
  for (int s = 0; s < k; s++) wdot += dw[s] * w[s];
  for (int e = 0; e < E; e++) pdot += dp[e] * p[e];
  if (sigmoid_scoring) {
    float all = 0.0f, sel = 0.0f;
    for (int e = 0; e < E; e++) all += rc_sigmoidf(l[e]);
    for (int s = 0; s < k; s++) sel += rc_sigmoidf(l[idx[s]]);
    /* dl[e] holds ds_e until the final sigmoid chain rule */
    for (int e = 0; e < E; e++) dl[e] = (dp[e] - pdot) / all;
    for (int s = 0; s < k; s++) dl[idx[s]] += (dw[s] - wdot) / sel;
    for (int e = 0; e < E; e++) {
      float sg = rc_sigmoidf(l[e]);
      dl[e] *= sg * (1.0f - sg);
    }
  } else {
    for (int e = 0; e < E; e++) dl[e] = p[e] * (dp[e] - pdot);
    for (int s = 0; s < k; s++) dl[idx[s]] += w[s] * (dw[s] - wdot);
  }
}

/* ---- AdamW (decoupled weight decay) on one element, in place ----
 *
 * g = grad * grad_scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
 * p -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + wd p). In float, IEEE
 * division and sqrtf: the same bits on both backends. */
RC_HD void rc_adamw_element(float *param, float *exp_avg, float *exp_avg_sq, float grad, float lr,
                            float beta1, float beta2, float eps, float weight_decay,
                            float grad_scale, float bias_correction1, float bias_correction2) {
  float g = grad * grad_scale;
  float m = beta1 * *exp_avg + (1.0f - beta1) * g;
  float v = beta2 * *exp_avg_sq + (1.0f - beta2) * g * g;
  *exp_avg = m;
  *exp_avg_sq = v;
  float p = *param;
  *param =
      p - lr * ((m / bias_correction1) / (sqrtf(v / bias_correction2) + eps) + weight_decay * p);
}

#endif
