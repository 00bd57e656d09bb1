#!/usr/bin/env python3
"""torch_crosscheck.py - an independent PyTorch re-implementation of one
resumecheck training step, started from a resumecheck checkpoint (issue #6).

    resumecheck train --preset tiny --precision fp32 --device cuda \\
        --steps 3 --save-at 2,3 --out D
    python3 bench/torch_crosscheck.py D --step 2

Loads D/ckpt/iter_000000K/shard_00000_of_00001.h5 (weights, optimizer
moments and step, expert bias, data position, the canonical config in
/meta), rebuilds the batch of step K+1 from the synthetic data stream
(src/core/data.c ported exactly: a pure function of (seed, sample index)
through rc_mix64), runs the model of src/core (model.c, model_layer.c,
train_step.c) with autograd, and compares step K+1's loss, MTP losses and
grad norm with row K+1 of D/trace.csv. If D also holds the checkpoint at
K+1, the AdamW update (the core's formula, clip and bias correction) is
applied and every parameter and moment is compared with it.

The model, as the core has it: token embedding; pre-norm layers RMSNorm ->
fused QKV (rows [q | k | v], head h at h*hd) -> interleaved RoPE on q and k
-> causal softmax attention (scale 1/sqrt(hd)) -> out proj -> residual;
RMSNorm -> SwiGLU ([gate | up]) or MoE (fp32 router on the unrounded
normalised input, sigmoid scores + expert_bias select top-k by (score desc,
index asc), weights s_sel / sum s_sel, stable dispatch, aux loss coeff * E *
sum_e f_e mean_t p[t,e] with p = s / sum s and f_e = count_e / (T k)
constant) -> residual; final RMSNorm; MTP depths k = 1..D through the
physical layer(s): x = eh_proj(concat(enorm(Emb(ids_k)), hnorm(h_{k-1}))),
h_k = final_norm_k(TRM(x)); head shared. Per microbatch
J = [CE0/N0 + lambda/D sum_k CE_k/N_k + aux] / M; grad norm = L2 over every
parameter's gradient (before clipping).

The loss's global denominators and detached MTP heads (docs/design.md §3.5):
with loss_type token-level or sequence-level the step's valid tokens N and
sequences S are counted first, and the step's objective is the main loss
(sum CE0 / N, or sum over samples of each sample's mean / S) + lambda/D
sum_k sum CE_k / N + each MoE layer's coeff * E * sum_e f_e sum_t p[t,e] / N,
whichever of the core's two orders (loss_normalize_at) ran: in float64 they
are the same sum. With mtp_detach_heads the MTP depths read the embedding,
the decoder's output and the output head's weight detached, the grad norm
is the other parameters' and mtp_grad_norm the MTP modules', and the update
clips each group with its own max-norm (clip_grad, mtp_clip_grad). The
controls --loss-type-as microbatch-mean, --mtp-denominator-as main,
--aux-denominator-as main, --heads-as attached, --mtp-clip-as shared and
--normalize-at-as each compute one of these the wrong way, so that the
agreement rests on the core doing it right.

Precision: with fp32 the step runs in float64 by default (--dtype), so the
difference is the core's own fp32 rounding (expect ~1e-6 relative). With
bf16 the core's emulation is reproduced: every linear rounds its input and
weight to bf16 in forward and its output gradient to bf16 in backward (what
model_layer.c does around each GEMM), and the head's logits are stored in
bf16 (gemm_to_half), as is fc1's output; the router stays unrounded. Expect
agreement to a few 1e-3. attention_precision bf16 (gpu-small's) is
emulated too: ops.h's BF16 attention contract as the CPU backend writes it
(BF16Attention below: q, k, v and dout rounded; P rounded before P V and
P^T dout, dS before dS K and dS^T Q; statistics unrounded), and the qkv
projection's output stored in 16 bits before RoPE (ops.h rope_forward
qkv_half, as Megatron-LM's bf16 projection hands it on).

Prints a table and one JSON line; exit 0 if every check is within
tolerance, 1 otherwise, 2 on bad input.
"""
import argparse
import csv
import json
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------- data (src/core/data.c)
def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def hash3(seed, a, b):
    return mix64(mix64(seed ^ 0x5DEECE66D) ^ mix64(((a * 0x9E3779B97F4A7C15) & MASK64) + b & MASK64))


def next_token(seed, V, prev, r):
    u = float(r >> 11) * (1.0 / 9007199254740992.0)
    j = 0 if u < 0.55 else 1 if u < 0.80 else 2 if u < 0.92 else 3
    return 1 + hash3(seed, prev & MASK64, j + 7) % (V - 1)


def make_sample(cfg, i, S):
    seed = cfg["seed"] & MASK64
    if cfg.get("data"):
        raise SystemExit("torch_crosscheck: --data FILE runs are not supported (synthetic corpus only)")
    span = S // 4 if S // 4 > 0 else 1
    ln = S + 1 - hash3(seed, i, 2) % span
    x = [0] * (S + 1)
    x[0] = 1 + hash3(seed, i, 3) % (cfg["vocab"] - 1)
    for t in range(1, S + 1):
        x[t] = next_token(seed, cfg["vocab"], x[t - 1], hash3(seed, i, 100 + t)) if t < ln else 0
    return x, ln


def make_batch(cfg, first, B, S, D):
    """ids, labels, mask: lists over depth 0..D of (B, S) arrays, as rc_data_batch."""
    ids = [np.zeros((B, S), np.int64) for _ in range(D + 1)]
    lab = [np.zeros((B, S), np.int64) for _ in range(D + 1)]
    msk = [np.zeros((B, S), np.float64) for _ in range(D + 1)]
    P = cfg.get("prompt_len", 0)
    for b in range(B):
        x, ln = make_sample(cfg, first + b, S)
        for t in range(S):
            ids[0][b, t] = x[t]
            lab[0][b, t] = x[t + 1]
            msk[0][b, t] = 1.0 if (t + 1 < ln and t >= P) else 0.0
        for k in range(1, D + 1):
            ids[k][b, :-1], lab[k][b, :-1], msk[k][b, :-1] = ids[k - 1][b, 1:], lab[k - 1][b, 1:], msk[k - 1][b, 1:]
    return ids, lab, msk


# ---------------------------------------------------------------- model
class RLinear(torch.autograd.Function):
    """y = r(x) r(W)^T; backward rounds dy first: the core's bf16 emulation."""

    @staticmethod
    def forward(ctx, x, w, rnd):
        xr, wr = rnd(x), rnd(w)
        ctx.save_for_backward(xr, wr)
        ctx.rnd = rnd
        return xr @ wr.t()

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        g = ctx.rnd(dy)
        return g @ wr, g.reshape(-1, g.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1]), None


class BF16Attention(torch.autograd.Function):
    """Causal attention under ops.h's BF16 contract, the CPU backend's order
    of operations (cpu_layers.c): forward o = sum_j bf16(exp(s_j - max)) v_j /
    sum_j exp(s_j - max); backward from p = exp(s - lse) and
    D = rowsum(bf16(dout) * bf16(o)). q, k, v: (B, nh, S, hd), already post-RoPE."""

    @staticmethod
    def forward(ctx, q, k, v, rnd):
        qr, kr, vr = rnd(q), rnd(k), rnd(v)
        S, hd = q.shape[-2], q.shape[-1]
        causal = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        s = ((qr @ kr.transpose(-1, -2)) * (1.0 / math.sqrt(hd))).masked_fill(causal, float("-inf"))
        mx = s.amax(-1, keepdim=True)
        e = torch.exp(s - mx)
        tot = e.sum(-1, keepdim=True)
        o = (rnd(e) @ vr) / tot
        ctx.save_for_backward(qr, kr, vr, o, mx + torch.log(tot))
        ctx.rnd, ctx.causal = rnd, causal
        return o

    @staticmethod
    def backward(ctx, do):
        qr, kr, vr, o, lse = ctx.saved_tensors
        rnd, scale = ctx.rnd, 1.0 / math.sqrt(qr.shape[-1])
        dor = rnd(do)
        D = (dor * rnd(o)).sum(-1, keepdim=True)
        s = ((qr @ kr.transpose(-1, -2)) * scale).masked_fill(ctx.causal, float("-inf"))
        p = torch.exp(s - lse)
        ds = p * (dor @ vr.transpose(-1, -2) - D)
        pr, dsr = rnd(p), rnd(ds)
        return (dsr @ kr) * scale, (dsr.transpose(-1, -2) @ qr) * scale, pr.transpose(-1, -2) @ dor, None


class RoundOut(torch.autograd.Function):
    """A layer output stored in bf16 (the half head's logits: ops.h
    gemm_to_half): rounded forward; the gradient passes as it is (the
    linear's backward rounds it for its GEMMs)."""

    @staticmethod
    def forward(ctx, x, rnd):
        return rnd(x)

    @staticmethod
    def backward(ctx, g):
        return g, None


class Core:
    def __init__(self, cfg, W, bias, dtype, dev):
        self.c, self.W, self.bias, self.dt, self.dev = cfg, W, bias, dtype, dev
        self.H, self.nh = cfg["hidden"], cfg["heads"]
        self.hd = self.H // self.nh
        self.E, self.K, self.D = cfg["experts"], cfg["topk"], cfg["mtp_depths"]
        self.eps = cfg["norm_eps"]
        bf16 = cfg["precision"] in ("bf16", "fp8")
        if cfg["precision"] in ("fp16", "fp8"):
            raise SystemExit("torch_crosscheck: precision %s is not supported (fp32, bf16)" % cfg["precision"])
        self.rnd = (lambda t: t.to(torch.bfloat16).to(dtype)) if bf16 else (lambda t: t)
        self.rnd_out = self.rnd  # the outputs a half linear stores in 16 bits (--outputs-as)
        self.attn_bf16 = cfg.get("attention_precision", "fp32") == "bf16"
        self.qkv_16 = True  # the qkv projection's output stored in 16 bits under BF16 attention
        self.rnd_bf16 = lambda t: t.to(torch.bfloat16).to(dtype)
        S = cfg["seq_len"]
        i = torch.arange(self.hd // 2, dtype=torch.float64)
        ang = torch.arange(S, dtype=torch.float64)[:, None] * cfg["rope_theta"] ** (-2.0 * i / self.hd)
        # the core computes angles, cos, sin in double, then rounds to float
        self.cos = ang.cos().float().to(dtype).to(dev)
        self.sin = ang.sin().float().to(dtype).to(dev)
        # the loss's denominators and detached heads as the run's config says (the
        # controls in main() change one of them)
        self.loss_type = cfg.get("loss_type", "microbatch-mean")
        self.detach = bool(cfg.get("mtp_detach_heads", False))
        self.mtp_den = self.aux_den = "tokens"
        self.finish = cfg.get("loss_normalize_at", "microbatch") == "finish"

    def lin(self, x, name):
        return RLinear.apply(x, self.W[name + "/weight"], self.rnd)

    def norm(self, x, name):
        w = self.W[name + "/weight"]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x):  # (B, S, n, hd), interleaved pairs
        x0, x1 = x[..., 0::2], x[..., 1::2]
        c, s = self.cos[None, :, None, :], self.sin[None, :, None, :]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

    def attention(self, a, p, B, S):
        qkv = self.lin(a, p + "/self_attention/linear_qkv")
        if self.attn_bf16 and self.qkv_16:  # under BF16 attention a half qkv stores 16 bits for RoPE
            qkv = RoundOut.apply(qkv, self.rnd_out)
        qkv = qkv.view(B, S, 3, self.nh, self.hd)
        q = self.rope(qkv[:, :, 0]).transpose(1, 2)
        k = self.rope(qkv[:, :, 1]).transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        if self.attn_bf16:
            o = BF16Attention.apply(q, k, v, self.rnd_bf16)
        else:
            sc = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
            causal = torch.ones(S, S, dtype=torch.bool, device=self.dev).triu(1)
            o = torch.softmax(sc.masked_fill(causal, float("-inf")), -1) @ v
        o = o.transpose(1, 2).reshape(B, S, self.H)
        return self.lin(o, p + "/self_attention/linear_proj")

    def swiglu(self, x, w1, w2):
        # a bf16 fc1's [gate | up] is stored in bf16 (gemm_to_half); SwiGLU reads it decoded
        h = RoundOut.apply(RLinear.apply(x, w1, self.rnd), self.rnd_out)
        g, u = h.chunk(2, dim=-1)
        return RLinear.apply(F.silu(g) * u, w2, self.rnd)

    def moe(self, a, p, T):
        """a: (T, H) normalised, unrounded. Returns (out, aux, counts)."""
        E, K = self.E, self.K
        logits = a @ self.W[p + "/mlp/router/weight"].t()  # fp32 router: no rounding
        sig = torch.sigmoid(logits)
        if self.c["moe_scoring"] != "sigmoid":
            raise SystemExit("torch_crosscheck: only --moe-scoring sigmoid is implemented")
        score = (sig + self.bias[p].to(sig.dtype)).detach()
        # top-k by (score desc, index asc): a stable sort on -score keeps the lower index first
        idx = torch.sort(-score, dim=-1, stable=True).indices[:, :K]
        s_sel = torch.gather(sig, 1, idx)
        w = s_sel / s_sel.sum(-1, keepdim=True)
        flat = idx.reshape(-1)
        counts = torch.bincount(flat, minlength=E)
        perm = torch.sort(flat, stable=True).indices  # (expert, token, slot) order
        xs = a[perm // K]
        w1, w2 = self.W[p + "/mlp/experts/linear_fc1/weight"], self.W[p + "/mlp/experts/linear_fc2/weight"]
        outs, lo = [], 0
        for e, n in enumerate(counts.tolist()):
            if n:
                outs.append(self.swiglu(xs[lo:lo + n], w1[e], w2[e]))
            lo += n
        ys = torch.cat(outs, 0)
        y = torch.empty_like(ys).index_copy(0, perm, ys).view(T, K, self.H)
        out = (y * w[..., None]).sum(1)
        prob = sig / sig.sum(-1, keepdim=True)
        f = counts.to(prob.dtype) / (T * K)
        aux = self.c["moe_aux_loss_coeff"] * E * (f * prob.mean(0)).sum()
        return out, aux, counts

    def layer(self, x, p, moe, B, S):
        a = self.norm(x, p + "/input_layernorm")
        x = x + self.attention(a, p, B, S)
        a = self.norm(x, p + "/pre_mlp_layernorm")
        if moe:
            out, aux, counts = self.moe(a.view(-1, self.H), p, B * S)
            return x + out.view(B, S, self.H), aux
        return x + self.swiglu(a, self.W[p + "/mlp/linear_fc1/weight"], self.W[p + "/mlp/linear_fc2/weight"]), None

    def microbatch(self, ids, lab, msk, counts=None):
        """J (this microbatch's share of the objective), main loss, MTP losses, and
        the main loss's numerator under a global denominator (0.0 otherwise).
        counts: the step's (valid tokens, valid sequences) for a global loss_type."""
        c, D, M = self.c, self.D, self.c["microbatches"]
        B, S = ids[0].shape
        L, moe_layers = c["layers"], parse_layers(c["moe_layers"])
        emb = self.W["embedding/word_embeddings/weight"]
        head = "embedding/word_embeddings" if c.get("tie_embeddings") else "output_layer"
        detach = self.detach
        x = emb[ids[0]]
        aux = []
        for l in range(L):
            x, a = self.layer(x, "decoder/layers/%d" % l, l in moe_layers, B, S)
            if a is not None:
                aux.append(a)
        hs = [self.norm(x, "decoder/final_layernorm")]
        for k in range(1, D + 1):
            p = "mtp/layers/%d" % (0 if c["mtp_repeated_layer"] else k - 1)
            # detached heads: the embedding and the decoder's output are constants to them
            e = (emb.detach() if detach else emb)[ids[k]]
            h = hs[-1].detach() if detach and k == 1 else hs[-1]
            cat = torch.cat([self.norm(e, p + "/enorm"), self.norm(h, p + "/hnorm")], -1)
            y, a = self.layer(self.lin(cat, p + "/eh_proj"), p + "/transformer_layer", (L - 1) in moe_layers, B, S)
            if a is not None:
                aux.append(a)
            hs.append(self.norm(y, p + "/final_layernorm"))
        global_loss = self.loss_type != "microbatch-mean"
        if global_loss:
            # normalised at the finish: raw sums here, main() scales the gradients once
            ntok, nseq = (1.0, 1.0) if self.finish else (max(v, 1.0) for v in counts)
            mtp_den = nseq if self.mtp_den == "sequences" else ntok
            aux_den = nseq if self.aux_den == "sequences" else ntok
            # the load-balancing loss summed over the microbatch's T tokens (mean * T)
            J = sum(a * (B * S) / aux_den for a in aux) if aux else 0.0
        else:
            J = sum(aux) if aux else 0.0
        losses, numerator = [], 0.0
        for k in range(D + 1):
            # a bf16 head's logits are bf16 values (the CE reads them in fp32); a detached
            # MTP head reads the output head's weight as a constant
            if k > 0 and detach:
                logits = RLinear.apply(hs[k], self.W[head + "/weight"].detach(), self.rnd)
            else:
                logits = self.lin(hs[k], head)
            logits = RoundOut.apply(logits, self.rnd_out).reshape(-1, c["vocab"])
            ce = F.cross_entropy(logits, lab[k].reshape(-1), reduction="none")
            m = msk[k].reshape(-1)
            n = float(m.sum()) or 1.0
            lk = (ce * m).sum() / n
            losses.append(lk)
            if not global_loss:
                J = J + (lk if k == 0 else c["mtp_loss_scale"] / D * lk)
            elif k > 0:
                J = J + c["mtp_loss_scale"] / D * (ce * m).sum() / mtp_den
            elif self.loss_type == "token-level":
                term = (ce * m).sum()
                numerator += float(term.detach())
                J = J + term / ntok
            else:  # sequence-level: each sample's mean over its valid tokens
                per = (ce * m).view(B, S).sum(1)
                nb = msk[0].sum(1)
                means = torch.where(nb > 0, per / nb.clamp(min=1.0), torch.zeros_like(per))
                numerator += float(means.sum().detach())
                J = J + means.sum() / nseq
        if global_loss:
            return J, [float(v.detach()) for v in losses], numerator
        return J / M, [float(v.detach()) for v in losses], 0.0


def parse_layers(s):
    if isinstance(s, list):
        return set(s)
    s = str(s).strip()
    return set() if s in ("", "none") else {int(v) for v in s.split(",")}


# ---------------------------------------------------------------- checkpoint
def shard_path(run, step):
    d = os.path.join(run, "ckpt", "iter_%07d" % step)
    return os.path.join(d, "shard_00000_of_00001.h5")


def load_shard(path):
    f = h5py.File(path, "r")
    meta = f["/meta"]
    cfg_raw = meta.attrs["config"]
    cfg = json.loads(cfg_raw.decode() if isinstance(cfg_raw, bytes) else str(cfg_raw))
    data = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            data["/" + name] = obj[()]

    f.visititems(visit)
    it = int(meta.attrs["iteration"])
    f.close()
    return cfg, data, it


def lr_at(cfg, s):
    if cfg["warmup"] > 0 and s <= cfg["warmup"]:
        return cfg["lr"] * s / cfg["warmup"]
    span = cfg["steps"] - cfg["warmup"]
    prog = min(1.0, (s - cfg["warmup"]) / span) if span > 0 else 1.0
    return cfg["min_lr"] + 0.5 * (cfg["lr"] - cfg["min_lr"]) * (1.0 + math.cos(math.pi * prog))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="the --out directory of a resumecheck train leg")
    ap.add_argument("--step", type=int, required=True, help="K: start from the checkpoint at K, check step K+1")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tol", type=float, default=None, help="relative tolerance (default 1e-5 fp32, 2e-2 bf16)")
    ap.add_argument("--loss-tol", type=float, default=None,
                    help="relative tolerance of the losses and the grad norm alone (default: --tol)")
    ap.add_argument("--grad-tol", type=float, default=None,
                    help="relative tolerance of the grad norm alone (default: --loss-tol)")
    ap.add_argument("--qkv-as", choices=["stored", "fp32"], default="stored",
                    help="under BF16 attention, the qkv projection's output rounded to 16 bits before "
                         "RoPE as the core stores it (default), or kept fp32: a control")
    ap.add_argument("--outputs-as", choices=["stored", "fp32"], default="stored",
                    help="the head's logits and fc1's output rounded to bf16 as the core stores them "
                         "(default), or kept fp32: a control that shows the rounding is the core's")
    ap.add_argument("--attention-as", choices=["run", "fp32", "bf16"], default="run",
                    help="emulate attention as the run's config says (default), or force one contract: "
                         "a control that shows how much the emulation matters")
    ap.add_argument("--mtp-denominator-as", choices=["run", "main"], default="run",
                    help="the MTP term over the step's valid tokens as the core has it (default), or over the "
                         "main loss's count (sequences under sequence-level): a control")
    ap.add_argument("--aux-denominator-as", choices=["run", "main"], default="run",
                    help="the MoE load-balancing loss over the step's valid tokens (default), or over the main "
                         "loss's count, as NeMo-RL's split path has it: a control")
    ap.add_argument("--loss-type-as", choices=["run", "microbatch-mean"], default="run",
                    help="the main loss's denominator as the run's config says (default), or each "
                         "microbatch's own mean: a control")
    ap.add_argument("--normalize-at-as", choices=["run", "microbatch", "finish"], default="run",
                    help="where the global denominators enter: as the run's config says (default), or the "
                         "other order; in float64 the same sum, with bf16 roundings not (a control)")
    ap.add_argument("--heads-as", choices=["run", "attached"], default="run",
                    help="the MTP heads detached as the run's config says (default), or attached: a control")
    ap.add_argument("--mtp-clip-as", choices=["run", "shared"], default="run",
                    help="detached heads: the MTP modules clipped with their own norm and max-norm (default), "
                         "or with the rest's clip coefficient: a control of the update check")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, a.dtype)
    dev = torch.device(a.device)

    path = shard_path(a.run, a.step)
    if not os.path.exists(path):
        print("torch_crosscheck: no shard %s" % path, file=sys.stderr)
        return 2
    cfg, st, it = load_shard(path)
    for need in ("moe_scoring", "precision"):
        if need not in cfg:
            print("torch_crosscheck: config lacks %r; keys: %s" % (need, sorted(cfg)), file=sys.stderr)
            return 2
    if cfg.get("attention_precision", "fp32") not in ("fp32", "bf16"):
        print("torch_crosscheck: attention_precision %s is not emulated (fp32, bf16)" % cfg["attention_precision"],
              file=sys.stderr)
        return 2
    tol = a.tol if a.tol is not None else (1e-5 if cfg["precision"] == "fp32" else 2e-2)
    names = sorted(k[len("/model/"):] for k in st if k.startswith("/model/"))
    W = {n: torch.tensor(st["/model/" + n], dtype=dtype, device=dev).requires_grad_(True) for n in names}
    bias = {k[len("/moe/expert_bias/"):]: torch.tensor(v, device=dev) for k, v in st.items()
            if k.startswith("/moe/expert_bias/")}
    consumed = int(st["/data/consumed_samples"])
    core = Core(cfg, W, bias, dtype, dev)
    if a.outputs_as == "fp32":
        core.rnd_out = lambda t: t
    if a.attention_as != "run":
        core.attn_bf16 = a.attention_as == "bf16"
    core.qkv_16 = a.qkv_as == "stored"
    if a.heads_as == "attached":
        core.detach = False
    if a.loss_type_as != "run":
        core.loss_type = a.loss_type_as
    if a.normalize_at_as != "run":
        core.finish = a.normalize_at_as == "finish"
    if a.mtp_denominator_as == "main" and core.loss_type == "sequence-level":
        core.mtp_den = "sequences"
    if a.aux_denominator_as == "main" and core.loss_type == "sequence-level":
        core.aux_den = "sequences"
    detached = bool(cfg.get("mtp_detach_heads", False))

    B, S, D, M = cfg["micro_batch"], cfg["seq_len"], cfg["mtp_depths"], cfg["microbatches"]
    batches = []
    ntok = nseq = 0.0
    for mb in range(M):
        ids, lab, msk = make_batch(cfg, consumed + mb * B, B, S, D)
        ntok += float(msk[0].sum())
        nseq += float((msk[0].sum(1) > 0).sum())
        batches.append((ids, lab, msk))
    loss, mtp, tokens, numerator = 0.0, [0.0] * D, 0, 0.0
    for ids, lab, msk in batches:
        ids = [torch.tensor(t, device=dev) for t in ids]
        lab = [torch.tensor(t, device=dev) for t in lab]
        msk = [torch.tensor(t, dtype=dtype, device=dev) for t in msk]
        tokens += int(msk[0].sum())
        J, ls, num = core.microbatch(ids, lab, msk, (ntok, nseq))
        J.backward()  # grads accumulate over microbatches, like main_grad
        loss += ls[0] / M
        numerator += num
        for k in range(D):
            mtp[k] += ls[k + 1] / M
    if core.loss_type != "microbatch-mean":  # the main loss as its denominator defines it
        loss = numerator / max(ntok if core.loss_type == "token-level" else nseq, 1.0)
    if core.loss_type != "microbatch-mean" and core.finish:
        # the finish's one scale per buffer (train_step.c normalise_at_finish): the detached MTP
        # modules' by the MTP term's count, every other one by the main loss's
        main_n = max(ntok if core.loss_type == "token-level" else nseq, 1.0)
        mtp_n = max(nseq if core.mtp_den == "sequences" else ntok, 1.0)
        with torch.no_grad():
            for n in names:
                if W[n].grad is not None:
                    W[n].grad.mul_(1.0 / (mtp_n if core.detach and n.startswith("mtp/") else main_n))
    # the core's parameter order does not matter for the value of the norm up to rounding;
    # detached heads: the MTP modules' norm apart
    grad = {n: (W[n].grad if W[n].grad is not None else torch.zeros_like(W[n])) for n in names}
    own = {n: detached and n.startswith("mtp/") for n in names}
    gnorm = math.sqrt(sum(float((grad[n].double() ** 2).sum()) for n in names if not own[n]))
    mtp_gnorm = math.sqrt(sum(float((grad[n].double() ** 2).sum()) for n in names if own[n]))

    rows = list(csv.DictReader(open(os.path.join(a.run, "trace.csv"))))
    row = next((r for r in rows if int(r["step"]) == a.step + 1), None)
    if row is None:
        print("torch_crosscheck: trace.csv has no step %d" % (a.step + 1), file=sys.stderr)
        return 2
    fx = lambda key: float.fromhex(row[key + "_hex"]) if (key + "_hex") in row else float(row[key])
    checks = [("tokens (data stream port)", float(tokens), float(row["tokens"]))]
    checks.append(("loss", loss, fx("loss")))
    checks += [("mtp_loss_%d" % (k + 1), mtp[k], fx("mtp_loss_%d" % (k + 1))) for k in range(D)]
    checks.append(("grad_norm", gnorm, fx("grad_norm")))
    if detached:
        if "mtp_grad_norm" not in row:
            print("torch_crosscheck: a detached-heads run's trace.csv has no mtp_grad_norm", file=sys.stderr)
            return 2
        checks.append(("mtp_grad_norm", mtp_gnorm, fx("mtp_grad_norm")))

    # AdamW, if the run also saved K+1: the core's formula in float64
    nxt = shard_path(a.run, a.step + 1)
    if os.path.exists(nxt):
        _, st1, _ = load_shard(nxt)
        step = int(st["/optimizer/step"]) + 1
        lr = lr_at(cfg, int(st["/scheduler/num_steps"]) + 1)
        clip = cfg["clip_grad"] / (gnorm + 1e-6) if cfg["clip_grad"] > 0 and gnorm > cfg["clip_grad"] else 1.0
        mclip = cfg.get("mtp_clip_grad", 1.0)
        clip_mtp = mclip / (mtp_gnorm + 1e-6) if mclip > 0 and mtp_gnorm > mclip else 1.0
        if a.mtp_clip_as == "shared":
            clip_mtp = clip
        b1, b2 = cfg["adam_beta1"], cfg["adam_beta2"]
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        worst = {"weight": (0.0, ""), "exp_avg": (0.0, ""), "exp_avg_sq": (0.0, "")}
        for n in names:
            decay = W[n].dim() >= 2
            g = grad[n].double().cpu().numpy() * (clip_mtp if own[n] else clip)
            m = b1 * st["/optimizer/exp_avg/" + n].astype(np.float64) + (1 - b1) * g
            v = b2 * st["/optimizer/exp_avg_sq/" + n].astype(np.float64) + (1 - b2) * g * g
            p = st["/model/" + n].astype(np.float64)
            p = p - lr * ((m / bc1) / (np.sqrt(v / bc2) + cfg["adam_eps"]) + (cfg["weight_decay"] if decay else 0) * p)
            for key, ours, theirs in (("weight", p, st1["/model/" + n]), ("exp_avg", m, st1["/optimizer/exp_avg/" + n]),
                                      ("exp_avg_sq", v, st1["/optimizer/exp_avg_sq/" + n])):
                den = max(float(np.abs(theirs).max()), 1e-30)
                r = float(np.abs(ours - theirs).max()) / den
                if r > worst[key][0]:
                    worst[key] = (r, n)
        for key, (r, n) in worst.items():
            checks.append(("%s@%d (max|d|/max|x|, %s)" % (key, a.step + 1, n or "-"), r, 0.0))

    ok = True
    print("torch_crosscheck: %s, K=%d, precision %s, attention %s, torch %s %s on %s, tolerance %.0e" %
          (a.run, a.step, cfg["precision"], cfg.get("attention_precision", "fp32"), a.dtype, torch.__version__,
           a.device, tol))
    print("%-52s %22s %22s %10s" % ("quantity (step %d)" % (a.step + 1), "torch", "resumecheck", "rel diff"))
    out = {}
    for name, ours, theirs in checks:
        if name.startswith(("weight@", "exp_avg@", "exp_avg_sq@")):
            rel = ours  # already a relative max difference
            print("%-52s %22s %22s %10.2e" % (name, "-", "-", rel))
        else:
            rel = abs(ours - theirs) / max(abs(theirs), 1e-30)
            print("%-52s %22.12g %22.12g %10.2e" % (name, ours, theirs, rel))
        out[name] = {"torch": ours, "core": theirs, "rel": rel}
        loss_like = name in ("loss", "grad_norm", "mtp_grad_norm") or name.startswith("mtp_loss_")
        limit = a.loss_tol if loss_like and a.loss_tol is not None else tol
        if name in ("grad_norm", "mtp_grad_norm") and a.grad_tol is not None:
            limit = a.grad_tol
        ok = ok and rel <= limit
    print(json.dumps({"crosscheck": "ok" if ok else "FAIL", "precision": cfg["precision"],
                      "attention_precision": cfg.get("attention_precision", "fp32"), "step": a.step + 1,
                      "tol": tol, "checks": out}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
