/* cpu_layers.c — the CPU layer ops: embedding, RMSNorm, RoPE, causal
 * attention, SwiGLU, softmax cross-entropy and dropout.
 *
 * Plain loops in a fixed order, written to be read next to the formulas in
 * ops.h: this is the numerical reference for the CUDA kernels. Sums that set
 * a normaliser (RMSNorm's mean square, cross-entropy's log-sum-exp) are taken
 * in double; everything else is float. RoPE angles are computed in double and
 * cast so that both backends start from the same cos/sin values. SwiGLU's
 * element math is backend/element_math.h's, which the CUDA kernels call too. */
#include "backend/cpu/cpu_internal.h"
#include "backend/element_math.h"
#include "backend/numeric.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- embedding ---- */

void rc_cpu_embedding_forward(float *out, const int32_t *ids, const float *table, int T, int H) {
  for (int t = 0; t < T; t++)
    memcpy(out + (size_t)t * H, table + (size_t)ids[t] * H, (size_t)H * sizeof(float));
}

/* Tokens in increasing t: the order ops.h defines, so repeated ids sum the
 * same way on every backend; RC_CPU_SUM_ORDER=shuffled (a kernel switch,
 * src/base/kernel_switches.h) takes them in an order drawn per process
 * instead. ids must lie in [0, V). */
void rc_cpu_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                               int V) {
  (void)V;
  /* RC_CPU_SUM_ORDER=shuffled: the tokens in an order drawn per process, as
   * atomics would add them (cpu_sum_order.c) */
  int32_t *order = NULL;
  if (rc_cpu_sum_order_shuffled()) {
    order = rc_cpu_scratch((size_t)(T > 0 ? T : 1) * sizeof *order, "embedding_backward");
    if (!order) return; /* recorded: the step stops (cpu_internal.h) */
    rc_cpu_sum_order_draw(order, T);
  }
  for (int i = 0; i < T; i++) {
    int t = order ? order[i] : i;
    float *row = dtable + (size_t)ids[t] * H;
    const float *g = dout + (size_t)t * H;
    for (int j = 0; j < H; j++) row[j] += g[j];
  }
  free(order);
}

/* ---- RMSNorm ---- */

/* A row's output where the caller wants it: out's row, or (out NULL) a
 * scratch row that only its 16-bit encoding leaves. */
static float *out_row(float *out, float *scratch, int t, int n) {
  return out ? out + (size_t)t * n : scratch;
}

void rc_cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                            float eps, uint16_t *out_half, int ld_half, rc_compute ct) {
  float *row = out ? NULL : rc_cpu_scratch((size_t)H * sizeof(float), "rmsnorm_forward");
  if (!out && !row) return; /* recorded: the step stops (cpu_internal.h) */
  for (int t = 0; t < T; t++) {
    const float *xt = x + (size_t)t * H;
    double ss = 0.0;
    for (int j = 0; j < H; j++) ss += (double)xt[j] * (double)xt[j];
    float r = 1.0f / sqrtf((float)(ss / H) + eps);
    rstd[t] = r;
    float *o = out_row(out, row, t, H);
    for (int j = 0; j < H; j++) o[j] = xt[j] * r * w[j];
    if (out_half) rc_cpu_cast_half(out_half + (size_t)t * ld_half, o, (size_t)H, ct);
  }
  free(row);
}

/* y_j = x_j r w_j with r = (mean(x^2) + eps)^-1/2, so
 * dx_j = r w_j g_j - x_j r^3 / H * sum_i g_i w_i x_i and dw_j = sum_t g_j x_j r. */
void rc_cpu_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                             const float *w, const float *rstd, int T, int H, int ld_dout,
                             uint16_t *dx_half, rc_compute ct, bool dx_accumulate) {
  for (int t = 0; t < T; t++) {
    const float *xt = x + (size_t)t * H, *g = dout + (size_t)t * ld_dout;
    float r = rstd[t];
    double dot = 0.0;
    for (int j = 0; j < H; j++) dot += (double)g[j] * w[j] * xt[j];
    float c = (float)(dot * r * r * r / H);
    float *dxt = dx + (size_t)t * H;
    for (int j = 0; j < H; j++) {
      dxt[j] = (dx_accumulate ? dxt[j] : 0.0f) + (r * w[j] * g[j] - xt[j] * c);
      dw[j] += g[j] * xt[j] * r;
    }
    if (dx_half) rc_cpu_cast_half(dx_half + (size_t)t * H, dxt, (size_t)H, ct);
  }
}

/* ---- RoPE ---- */

/* cos/sin of s * theta^(-2i/hd) for s < S, i < hd/2, in double, then float. */
static void rope_table(float *cs, float *sn, int S, int hd, float theta) {
  int half = hd / 2;
  for (int i = 0; i < half; i++) {
    double inv_freq = pow((double)theta, -2.0 * i / hd);
    for (int s = 0; s < S; s++) {
      double ang = (double)s * inv_freq;
      cs[(size_t)s * half + i] = (float)cos(ang);
      sn[(size_t)s * half + i] = (float)sin(ang);
    }
  }
}

/* Rotates the q and k parts of every row by sign * angle: sign +1 is the
 * forward rotation, -1 its inverse (= its transpose, the backward). */
static void rope_apply(float *qkv, int B, int S, int nh, int hd, float theta, float sign) {
  int half = hd / 2;
  size_t n = (size_t)S * half;
  float *cs = rc_cpu_scratch(2 * n * sizeof(float) + 1, "rope (angle table)");
  if (!cs) return; /* recorded: the step stops (cpu_internal.h) */
  float *sn = cs + n;
  rope_table(cs, sn, S, hd, theta);
  size_t row = 3 * (size_t)nh * hd;
  for (int b = 0; b < B; b++) {
    for (int s = 0; s < S; s++) {
      float *x = qkv + ((size_t)b * S + s) * row;
      const float *c = cs + (size_t)s * half, *si = sn + (size_t)s * half;
      for (int h = 0; h < 2 * nh; h++) { /* q heads then k heads: 2*nh blocks of hd */
        float *v = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
          float x0 = v[2 * i], x1 = v[2 * i + 1], sgn = sign * si[i];
          v[2 * i] = x0 * c[i] - x1 * sgn;
          v[2 * i + 1] = x0 * sgn + x1 * c[i];
        }
      }
    }
  }
  free(cs);
}

/* Between qkv [B*S, 3*nh*hd] and heads [3][B][nh][S][hd]: to_heads encodes
 * each element as bf16, else decodes (exact: every value is a bf16). */
static void qkv_heads(float *qkv, uint16_t *heads, int B, int S, int nh, int hd, bool to_heads) {
  size_t row = 3 * (size_t)nh * hd;
  for (int part = 0; part < 3; part++)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < nh; h++)
        for (int s = 0; s < S; s++) {
          float *q = qkv + ((size_t)b * S + s) * row + ((size_t)part * nh + h) * hd;
          uint16_t *e = heads + ((((size_t)part * B + b) * nh + h) * S + s) * hd;
          for (int d = 0; d < hd; d++)
            if (to_heads)
              e[d] = rc_bf16_encode(q[d]);
            else
              q[d] = rc_bf16_decode(e[d]);
        }
}

/* The reference rotates in place either way (a 16-bit qkv decoded into qkv
 * first); heads is its rounding. */
void rc_cpu_rope_forward(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                         int nh, int hd, float theta, uint16_t *heads) {
  if (qkv_half) rc_cpu_decode_half(qkv, qkv_half, (size_t)B * S * 3 * nh * hd, half_ct);
  rope_apply(qkv, B, S, nh, hd, theta, 1.0f);
  if (heads) qkv_heads(qkv, heads, B, S, nh, hd, true);
}

void rc_cpu_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta,
                          uint16_t *dqkv_half, rc_compute ct) {
  rope_apply(dqkv, B, S, nh, hd, theta, -1.0f);
  if (dqkv_half) rc_cpu_cast_half(dqkv_half, dqkv, (size_t)B * S * 3 * nh * hd, ct);
}

/* ---- causal attention ---- */

static float dotf(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* The BF16 attention contract of ops.h, emulated: a bf16-rounded copy of n
 * floats (the caller frees it), or src itself for FP32; NULL when its
 * scratch cannot be had (recorded, cpu_internal.h). */
static const float *att_rounded(const float *src, size_t n, rc_compute ct, float **owned) {
  *owned = NULL;
  if (!src || ct != RC_COMPUTE_BF16) return src;
  float *r = rc_cpu_scratch(n * sizeof(float), "attention (bf16 operands)");
  if (!r) return NULL;
  for (size_t i = 0; i < n; i++) r[i] = rc_round_bf16(src[i]);
  *owned = r;
  return r;
}

/* Per (batch, head, query i): scores s_j = q_i.k_j / sqrt(hd) for j <= i,
 * lse = log sum exp s_j, out_i = sum_j exp(s_j - lse) v_j. With BF16 the
 * weights exp(s_j - max) are rounded before they multiply v_j and the sum is
 * divided out at the end (the tensor-core kernel's order of operations). */
/* The fp32 qkv an attention op reads: qkv itself, or decoded from heads into
 * scratch (*owned, which the caller frees); NULL when that cannot be had. */
static const float *att_qkv(const float *qkv, const uint16_t *heads, int B, int S, int nh, int hd,
                            float **owned) {
  *owned = NULL;
  if (!heads) return qkv;
  float *q = rc_cpu_scratch((size_t)B * S * 3 * nh * hd * sizeof(float), "attention (qkv)");
  if (!q) return NULL;
  qkv_heads(q, (uint16_t *)heads, B, S, nh, hd, false); /* decoding only reads heads */
  *owned = q;
  return q;
}

void rc_cpu_attention_forward(rc_compute ct, float *out, float *lse, const float *qkv,
                              const uint16_t *heads, int B, int S, int nh, int hd,
                              uint16_t *out_half, rc_compute half_ct) {
  size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  float scale = 1.0f / sqrtf((float)hd);
  bool bf16 = ct == RC_COMPUTE_BF16;
  float *owned, *decoded;
  qkv = att_qkv(qkv, heads, B, S, nh, hd, &decoded);
  qkv = att_rounded(qkv, (size_t)B * S * row, ct, &owned);
  float *sc = rc_cpu_scratch((size_t)S * sizeof(float), "attention_forward (scores)");
  /* out NULL (only out_half asked for): the fp32 values in scratch */
  float *out_scratch =
      out ? NULL : rc_cpu_scratch((size_t)B * S * orow * sizeof(float), "attention_forward (out)");
  if (!qkv || !sc || (!out && !out_scratch)) { /* recorded: the step stops (cpu_internal.h) */
    free(sc), free(owned), free(decoded), free(out_scratch);
    return;
  }
  if (!out) out = out_scratch;
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (size_t)b * S * row;
    for (int h = 0; h < nh; h++) {
      const float *Q = base + (size_t)h * hd, *K = Q + orow, *V = Q + 2 * orow;
      for (int i = 0; i < S; i++) {
        const float *q = Q + (size_t)i * row;
        float mx = -INFINITY;
        for (int j = 0; j <= i; j++) {
          sc[j] = dotf(q, K + (size_t)j * row, hd) * scale;
          if (sc[j] > mx) mx = sc[j];
        }
        float sum = 0.0f;
        for (int j = 0; j <= i; j++) {
          sc[j] = expf(sc[j] - mx);
          sum += sc[j];
        }
        float inv = 1.0f / sum;
        float *o = out + ((size_t)b * S + i) * orow + (size_t)h * hd;
        for (int d = 0; d < hd; d++) o[d] = 0.0f;
        for (int j = 0; j <= i; j++) {
          float p = bf16 ? rc_round_bf16(sc[j]) : sc[j] * inv;
          const float *v = V + (size_t)j * row;
          for (int d = 0; d < hd; d++) o[d] += p * v[d];
        }
        if (bf16)
          for (int d = 0; d < hd; d++) o[d] *= inv;
        lse[((size_t)b * nh + h) * S + i] = mx + logf(sum);
      }
    }
  }
  free(sc);
  free(owned);
  free(decoded);
  if (out_half) rc_cpu_cast_half(out_half, out, (size_t)B * S * orow, half_ct);
  free(out_scratch);
}

/* Recomputes P = exp(S - lse) and applies, per (batch, head):
 * dP = dout V^T, dS = P * (dP - rowsum(dout * out)), dQ = dS K * scale,
 * dK = dS^T Q * scale, dV = P^T dout. dK and dV sum over queries i in
 * increasing order. BF16 rounds q, k, v, dout, out (for D), and P and dS
 * where they enter a product (ops.h). */
void rc_cpu_attention_backward(rc_compute ct, float *dqkv, const float *dout, const float *out,
                               const float *lse, const float *qkv, const uint16_t *heads, int B,
                               int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                               uint16_t *dqkv_half, rc_compute half_ct) {
  size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  /* dqkv_half: the fp32 gradient in scratch (or dqkv), then rope_backward's
   * 16-bit form of it: ops.h's definition */
  bool want_dqkv = dqkv_half && !dqkv;
  float *dqkv_scratch =
      want_dqkv ? rc_cpu_scratch((size_t)B * S * row * sizeof(float), "attention_backward (dqkv)")
                : NULL;
  if (want_dqkv && !dqkv_scratch) return; /* recorded: the step stops (cpu_internal.h) */
  if (dqkv_scratch) dqkv = dqkv_scratch;
  float scale = 1.0f / sqrtf((float)hd);
  bool bf16 = ct == RC_COMPUTE_BF16;
  float *owned_qkv, *owned_dout, *owned_out = NULL, *decoded;
  qkv = att_qkv(qkv, heads, B, S, nh, hd, &decoded);
  qkv = att_rounded(qkv, (size_t)B * S * row, ct, &owned_qkv);
  dout = att_rounded(dout, (size_t)B * S * orow, ct, &owned_dout);
  if (bf16 && out_bf16) { /* the forward's bf16 output, decoded exactly */
    owned_out = rc_cpu_scratch((size_t)B * S * orow * sizeof(float), "attention_backward (out)");
    for (size_t i = 0; owned_out && i < (size_t)B * S * orow; i++)
      owned_out[i] = rc_bf16_decode(out_bf16[i]);
    out = owned_out;
  } else {
    out = att_rounded(out, (size_t)B * S * orow, ct, &owned_out);
  }
  if (!qkv || !dout || !out) { /* recorded: the step stops (cpu_internal.h) */
    free(owned_qkv), free(owned_dout), free(owned_out), free(decoded), free(dqkv_scratch);
    return;
  }
  memset(dqkv, 0, (size_t)B * S * row * sizeof(float));
  for (int b = 0; b < B; b++) {
    const float *base = qkv + (size_t)b * S * row;
    float *dbase = dqkv + (size_t)b * S * row;
    for (int h = 0; h < nh; h++) {
      const float *Q = base + (size_t)h * hd, *K = Q + orow, *V = Q + 2 * orow;
      float *dQ = dbase + (size_t)h * hd, *dK = dQ + orow, *dV = dQ + 2 * orow;
      for (int i = 0; i < S; i++) {
        const float *q = Q + (size_t)i * row;
        const float *go = dout + ((size_t)b * S + i) * orow + (size_t)h * hd;
        const float *o = out + ((size_t)b * S + i) * orow + (size_t)h * hd;
        float l = lse[((size_t)b * nh + h) * S + i];
        float D = dotf(go, o, hd);
        float *dq = dQ + (size_t)i * row;
        for (int j = 0; j <= i; j++) {
          const float *kj = K + (size_t)j * row, *vj = V + (size_t)j * row;
          float p = expf(dotf(q, kj, hd) * scale - l);
          float ds = p * (dotf(go, vj, hd) - D);
          if (bf16) p = rc_round_bf16(p), ds = rc_round_bf16(ds);
          float *dk = dK + (size_t)j * row, *dv = dV + (size_t)j * row;
          for (int d = 0; d < hd; d++) {
            dq[d] += ds * scale * kj[d];
            dk[d] += ds * scale * q[d];
            dv[d] += p * go[d];
          }
        }
      }
    }
  }
  free(owned_qkv);
  free(owned_dout);
  free(owned_out);
  free(decoded);
  if (dqkv_half) rc_cpu_rope_backward(dqkv, B, S, nh, hd, rope_theta, dqkv_half, half_ct);
  free(dqkv_scratch);
}

/* ---- SwiGLU ---- */

/* Row t of a [T, 2F] SwiGLU input: in's, or in_half's decoded into scratch. */
static const float *swiglu_in_row(const float *in, const uint16_t *in_half, float *scratch, int t,
                                  int F, rc_compute ct) {
  if (in) return in + (size_t)t * 2 * F;
  rc_cpu_decode_half(scratch, in_half + (size_t)t * 2 * F, (size_t)2 * F, ct);
  return scratch;
}

void rc_cpu_swiglu_forward(float *out, const float *in, const uint16_t *in_half, int T, int F,
                           uint16_t *out_half, rc_compute ct) {
  float *row = out ? NULL : rc_cpu_scratch((size_t)F * sizeof(float), "swiglu_forward");
  float *in_row = in ? NULL : rc_cpu_scratch((size_t)2 * F * sizeof(float), "swiglu_forward");
  if ((!out && !row) || (!in && !in_row)) { /* recorded: the step stops (cpu_internal.h) */
    free(row), free(in_row);
    return;
  }
  for (int t = 0; t < T; t++) {
    const float *g = swiglu_in_row(in, in_half, in_row, t, F, ct), *u = g + F;
    float *o = out_row(out, row, t, F);
    for (int j = 0; j < F; j++) o[j] = rc_swiglu_forward_element(g[j], u[j]);
    if (out_half) rc_cpu_cast_half(out_half + (size_t)t * F, o, (size_t)F, ct);
  }
  free(row);
  free(in_row);
}

void rc_cpu_swiglu_backward(float *din, const float *dout, const float *in, const uint16_t *in_half,
                            int T, int F, uint16_t *din_half, uint16_t *out_half, rc_compute ct) {
  float *row = din ? NULL : rc_cpu_scratch((size_t)2 * F * sizeof(float), "swiglu_backward");
  float *in_row = in ? NULL : rc_cpu_scratch((size_t)2 * F * sizeof(float), "swiglu_backward");
  float *fwd = out_half ? rc_cpu_scratch((size_t)F * sizeof(float), "swiglu_backward") : NULL;
  if ((!din && !row) || (!in && !in_row) || (out_half && !fwd)) { /* recorded (cpu_internal.h) */
    free(row), free(in_row), free(fwd);
    return;
  }
  for (int t = 0; t < T; t++) {
    const float *g = swiglu_in_row(in, in_half, in_row, t, F, ct), *u = g + F,
                *d = dout + (size_t)t * F;
    float *dg = out_row(din, row, t, 2 * F), *du = dg + F;
    for (int j = 0; j < F; j++) rc_swiglu_backward_element(&dg[j], &du[j], g[j], u[j], d[j]);
    if (din_half) rc_cpu_cast_half(din_half + (size_t)t * 2 * F, dg, (size_t)2 * F, ct);
    if (fwd) { /* swiglu_forward's out_half of this row */
      for (int j = 0; j < F; j++) fwd[j] = rc_swiglu_forward_element(g[j], u[j]);
      rc_cpu_cast_half(out_half + (size_t)t * F, fwd, (size_t)F, ct);
    }
  }
  free(row);
  free(in_row);
  free(fwd);
}

/* ---- softmax cross-entropy ---- */

void rc_cpu_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                          const float *dloss, int T, int V, uint16_t *dlogits_half, rc_compute ct) {
  /* 16-bit logits (logits NULL): each row decoded into scratch, computed
   * there as an fp32 row is, and its gradient encoded back over it */
  float *row = logits ? NULL : rc_cpu_scratch((size_t)V * sizeof(float), "cross_entropy");
  if (!logits && !row) return; /* recorded: the step stops (cpu_internal.h) */
  for (int t = 0; t < T; t++) {
    float *l = logits ? logits + (size_t)t * V : row;
    if (!logits) rc_cpu_decode_half(l, dlogits_half + (size_t)t * V, (size_t)V, ct);
    int amax = 0;
    for (int v = 1; v < V; v++)
      if (l[v] > l[amax]) amax = v; /* strict: ties keep the lowest index */
    double mx = l[amax], se = 0.0;
    for (int v = 0; v < V; v++) se += exp((double)l[v] - mx);
    double lse = mx + log(se);
    int y = labels[t];
    losses[t] = (float)(lse - (double)l[y]);
    correct[t] = amax == y ? 1.0f : 0.0f;
    float d = dloss ? dloss[t] : 0.0f;
    if (d == 0.0f) { /* all +0.0: d*(p-1) would leave -0.0 at the label */
      memset(l, 0, (size_t)V * sizeof(float));
    } else {
      for (int v = 0; v < V; v++) {
        float p = (float)exp((double)l[v] - lse);
        l[v] = d * (v == y ? p - 1.0f : p);
      }
    }
    if (dlogits_half) /* the in-place row, encoded: bitwise cast_half of it */
      rc_cpu_cast_half(dlogits_half + (size_t)t * V, l, (size_t)V, ct);
  }
  free(row);
}

/* ---- dropout ---- */

/* Same decision as rc_dropout_keep(seed, offset, i, p), with one Philox block
 * per four elements instead of one per element. */
void rc_cpu_dropout(float *x, size_t n, float p, uint64_t seed, uint64_t offset) {
  float keep_scale = 1.0f - p;
  for (size_t i0 = 0; i0 < n; i0 += 4) {
    rc_philox4 r = rc_philox4x32(seed, 0, offset + (i0 >> 2));
    for (size_t w = 0; w < 4 && i0 + w < n; w++)
      x[i0 + w] = rc_uniform01(r.v[w]) >= p ? x[i0 + w] / keep_scale : 0.0f;
  }
}
