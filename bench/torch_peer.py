#!/usr/bin/env python3
"""torch_peer.py - the PyTorch throughput peer of resumecheck's training core.

Same model and step as src/core (model.c, model_layer.c, train_step.c):
GPT-style pre-norm decoder (RMSNorm, fused QKV, interleaved RoPE, causal
attention, SwiGLU MLP or sigmoid-scored top-k MoE with expert bias and aux
loss), final norm, untied head, MTP with D depths through one repeated
physical layer, AdamW + clip + warmup/cosine. fp32 master weights, bf16
compute via autocast (router in fp32).

Prints one JSON line. Modes: eager | deterministic (eager with
torch.use_deterministic_algorithms) | compile (the fixed-shape pieces
compiled, the MoE dispatch eager) | compile-whole (the whole microbatch
forward compiled as one graph: the peer a user would write, with the MoE
experts as one grouped GEMM, torch._grouped_mm, where this PyTorch has it,
so no host sync breaks the graph) | compile-whole-det (the same under
torch.use_deterministic_algorithms); or --gemm-peak.

--profile-out PATH: after the timed steps, 3 more steps under
torch.profiler, reported to PATH as device kernel time per step by category
and the top kernels (CPU op self-times where there is no CUDA), to see where
a peer's step time goes; the JSON line gains "profile_out" (the report's
path, null where profiling failed: the timed result stands either way).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

PROFILE_STEPS = 3  # enough to average out one step's noise, few enough to keep the trace small

P = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
P.add_argument("--mode", choices=["eager", "deterministic", "compile", "compile-whole", "compile-whole-det"],
               default="eager")
P.add_argument("--steps", type=int, default=20)
P.add_argument("--warmup", type=int, default=3)
P.add_argument("--device", default="cuda")
P.add_argument("--tiny", action="store_true", help="the 'tiny' preset, for smoke tests")
P.add_argument("--no-moe", action="store_true", help="dense MLP everywhere")
P.add_argument("--gemm-peak", action="store_true", help="time an 8192^3 bf16 matmul instead")
P.add_argument("--seed", type=int, default=1234)
P.add_argument("--batch", type=int, help="sequences per microbatch (gpu-small: 8)")
P.add_argument("--microbatches", type=int, help="microbatches per step (gpu-small: 2)")
P.add_argument("--vocab", type=int, help="vocabulary size (gpu-small: 32768)")
P.add_argument("--profile-out", metavar="PATH",
               help="after the timed steps, profile %d more and write a kernel-time report to PATH" % PROFILE_STEPS)
args = P.parse_args()
if args.gemm_peak and args.profile_out:
    P.error("--profile-out profiles training steps; it does nothing with --gemm-peak")
DETERMINISTIC = args.mode in ("deterministic", "compile-whole-det")
WHOLE = args.mode in ("compile-whole", "compile-whole-det")

if DETERMINISTIC:
    # must be set before CUDA (cuBLAS) initialises
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEV = torch.device(args.device)
IS_CUDA = DEV.type == "cuda"


def sync():
    if IS_CUDA:
        torch.cuda.synchronize()


def emit(d):
    print(json.dumps(d), flush=True)


# ---------------------------------------------------------------- gemm peak
if args.gemm_peak:
    n = 8192 if IS_CUDA else 512
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        sync()
        t0 = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    emit({"mode": "gemm_peak", "n": n, "ms_median": t * 1e3, "tflops": 2.0 * n ** 3 / t / 1e12})
    sys.exit(0)

# ---------------------------------------------------------------- config
if args.tiny:
    C = dict(V=256, H=64, L=2, nh=4, F=128, S=32, B=2, M=2, moe_layers=[1], E=4, K=2)
else:  # gpu-small
    C = dict(V=32768, H=768, L=12, nh=12, F=2048, S=1024, B=8, M=2, moe_layers=[11], E=8, K=2)
if args.no_moe:
    C["moe_layers"] = []
for key, val in (("B", args.batch), ("M", args.microbatches), ("V", args.vocab)):
    if val:
        C[key] = val
C.update(D=2, mtp_scale=0.1, eps=1e-5, theta=1e4, std=0.02, aux_coeff=1e-2, bias_rate=1e-3,
         lr=3e-3, min_lr=3e-4, warmup_sched=2, clip=1.0, wd=0.1, betas=(0.9, 0.95), adam_eps=1e-8)
V, H, L, NH, FF, S, B, M, E, K, D = (C[k] for k in ("V", "H", "L", "nh", "F", "S", "B", "M", "E", "K", "D"))
HD = H // NH
TOTAL_STEPS = args.warmup + args.steps  # the LR schedule spans the whole run, as --steps does in the core

if DETERMINISTIC:
    torch.use_deterministic_algorithms(True)  # warn_only=False: flash/mem-eff attention bwd go deterministic
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32 (router); bf16 comes from autocast
torch.manual_seed(args.seed)


# The MoE experts as grouped GEMMs (compile-whole, on CUDA where torch has
# them); elsewhere the per-expert loop, whose host sync breaks a graph.
GROUPED_MOE = WHOLE and IS_CUDA and hasattr(torch, "_grouped_mm")


# ---------------------------------------------------------------- model
def rmsnorm(x, w):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + C["eps"]) * w


def rope_tables(device):
    i = torch.arange(0, HD // 2, device=device, dtype=torch.float32)
    inv = C["theta"] ** (-2.0 * i / HD)
    ang = torch.arange(S, device=device, dtype=torch.float32)[:, None] * inv[None, :]  # (S, HD/2)
    return ang.cos(), ang.sin()


def rope(x, cos, sin):
    # x: (B, S, nh, hd); interleaved pairs (2i, 2i+1)
    x = x.float()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class Layer(torch.nn.Module):
    def __init__(self, moe):
        super().__init__()
        std, ostd = C["std"], C["std"] / math.sqrt(2.0 * L)
        self.moe = moe
        self.ln1 = torch.nn.Parameter(torch.ones(H))
        self.qkv = torch.nn.Parameter(torch.randn(3 * H, H) * std)  # rows [q|k|v], head h at h*hd
        self.proj = torch.nn.Parameter(torch.randn(H, H) * ostd)
        self.ln2 = torch.nn.Parameter(torch.ones(H))
        if moe:
            self.router = torch.nn.Parameter(torch.randn(E, H) * std)
            self.fc1 = torch.nn.Parameter(torch.randn(E, 2 * FF, H) * std)  # [gate|up]
            self.fc2 = torch.nn.Parameter(torch.randn(E, H, FF) * ostd)
            self.register_buffer("expert_bias", torch.zeros(E))
        else:
            self.fc1 = torch.nn.Parameter(torch.randn(2 * FF, H) * std)
            self.fc2 = torch.nn.Parameter(torch.randn(H, FF) * ostd)

    @staticmethod
    def swiglu(x, w1, w2):
        g, u = F.linear(x, w1).chunk(2, dim=-1)
        return F.linear(F.silu(g) * u, w2)

    def moe_mlp(self, x):
        """x: (T, H) normalised (fp32). Returns (out, aux, counts)."""
        T = x.shape[0]
        with torch.autocast(DEV.type, enabled=False):  # router in fp32
            logits = F.linear(x.float(), self.router)
        s = torch.sigmoid(logits)
        idx = torch.topk(s + self.expert_bias, K, dim=-1).indices  # (T, K), selection only
        s_sel = (F.one_hot(idx, E).to(s.dtype) * s[:, None, :]).sum(-1)  # gather without scatter_add bwd
        w = s_sel / s_sel.sum(-1, keepdim=True)
        flat = idx.reshape(-1)
        counts = (flat[:, None] == torch.arange(E, device=x.device)[None, :]).sum(0)  # no bincount: deterministic
        perm = torch.argsort(flat, stable=True)
        xs = x[perm // K]  # token rows grouped by expert
        outs, lo = [], 0
        for e, n in enumerate(counts.tolist()):  # host sync, as the core's moe_permute offsets
            if n:
                outs.append(self.swiglu(xs[lo:lo + n], self.fc1[e], self.fc2[e]))
            lo += n
        ys = torch.cat(outs, 0).float()
        y = ys[torch.argsort(perm)].view(T, K, H)  # back to (token, slot) order
        out = (y * w[..., None]).sum(1)
        # load balancing: coeff * E * sum_e f_e * mean_t p[t,e], f_e = tokens_e/(T*K) (constant)
        p = s / s.sum(-1, keepdim=True)
        f = counts.detach().float() / (T * K)
        aux = C["aux_coeff"] * E * (f * p.mean(0)).sum()
        return out, aux, counts

    def moe_mlp_grouped(self, x):
        """moe_mlp with the experts as two grouped GEMMs over the rows sorted
        by expert (offsets from the counts on the device): fixed shapes and no
        host sync, so the whole forward compiles as one graph."""
        T = x.shape[0]
        with torch.autocast(DEV.type, enabled=False):
            logits = F.linear(x.float(), self.router)
        s = torch.sigmoid(logits)
        idx = torch.topk(s + self.expert_bias, K, dim=-1).indices
        s_sel = (F.one_hot(idx, E).to(s.dtype) * s[:, None, :]).sum(-1)
        w = s_sel / s_sel.sum(-1, keepdim=True)
        flat = idx.reshape(-1)
        counts = (flat[:, None] == torch.arange(E, device=x.device)[None, :]).sum(0)
        perm = torch.argsort(flat, stable=True)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = x[perm // K].to(torch.bfloat16)
        h = torch._grouped_mm(xs, self.fc1.to(torch.bfloat16).transpose(1, 2), offs=offs)
        g, u = h.chunk(2, dim=-1)
        ys = torch._grouped_mm((F.silu(g) * u).contiguous(), self.fc2.to(torch.bfloat16).transpose(1, 2),
                               offs=offs).float()
        y = ys[torch.argsort(perm)].view(T, K, H)
        out = (y * w[..., None]).sum(1)
        p = s / s.sum(-1, keepdim=True)
        f = counts.detach().float() / (T * K)
        aux = C["aux_coeff"] * E * (f * p.mean(0)).sum()
        return out, aux, counts

    # attention() and dense_mlp() are the fixed-shape halves of the layer:
    # in --mode compile each is compiled on its own, while moe_mlp (whose
    # per-expert row counts change every step) stays eager, as per-block
    # compilation with an eager MoE dispatch does in TorchTitan.
    def attention(self, x, cos, sin):
        Bx = x.shape[0]
        a = rmsnorm(x, self.ln1)
        qkv = F.linear(a, self.qkv).view(Bx, S, 3, NH, HD)
        q = rope(qkv[:, :, 0], cos, sin).transpose(1, 2)
        k = rope(qkv[:, :, 1], cos, sin).transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        dt = torch.bfloat16 if (IS_CUDA or torch.is_autocast_enabled(DEV.type)) else q.dtype
        o = F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), is_causal=True, scale=1.0 / math.sqrt(HD))
        o = o.transpose(1, 2).reshape(Bx, S, H)
        return x + F.linear(o, self.proj).float()

    def dense_mlp(self, x):
        return x + self.swiglu(rmsnorm(x, self.ln2), self.fc1, self.fc2).float()

    def forward(self, x, cos, sin):
        x = self.attention(x, cos, sin)
        if self.moe:
            mlp = self.moe_mlp_grouped if GROUPED_MOE else self.moe_mlp
            out, aux, counts = mlp(rmsnorm(x, self.ln2).view(-1, H))
            return x + out.view(x.shape), aux, counts
        return self.dense_mlp(x), None, None


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(V, H) * C["std"])
        self.layers = torch.nn.ModuleList([Layer(l in C["moe_layers"]) for l in range(L)])
        self.final_norm = torch.nn.Parameter(torch.ones(H))
        # MTP: one physical layer, called D times
        self.enorm = torch.nn.Parameter(torch.ones(H))
        self.hnorm = torch.nn.Parameter(torch.ones(H))
        self.eh_proj = torch.nn.Parameter(torch.randn(H, 2 * H) * C["std"])  # input [emb | hidden]
        self.trm = Layer((L - 1) in C["moe_layers"])
        self.mtp_norm = torch.nn.Parameter(torch.ones(H))
        self.head = torch.nn.Parameter(torch.randn(V, H) * C["std"])
        cos, sin = rope_tables("cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    @staticmethod
    def ce(h, head, labels, mask):
        logits = F.linear(h, head).float()
        l = F.cross_entropy(logits.view(-1, V), labels.reshape(-1), reduction="none")
        m = mask.reshape(-1)
        return (l * m).sum() / m.sum().clamp_min(1)

    def forward(self, ids, labels, mask):
        """One microbatch: returns (J for this microbatch, main CE, [counts per MoE layer])."""
        aux_total = torch.zeros((), device=ids[0].device)
        counts = []
        x = F.embedding(ids[0], self.emb)
        for layer in self.layers:
            x, aux, c = layer(x, self.cos, self.sin)
            if aux is not None:
                aux_total = aux_total + aux
                counts.append(c)
        h = rmsnorm(x, self.final_norm)
        hs = [h]
        mtp_counts = []
        for k in range(1, D + 1):
            e = rmsnorm(F.embedding(ids[k], self.emb), self.enorm)
            xk = F.linear(torch.cat([e, rmsnorm(hs[-1], self.hnorm)], -1), self.eh_proj).float()
            y, aux, c = self.trm(xk, self.cos, self.sin)
            if aux is not None:
                aux_total = aux_total + aux
                mtp_counts.append(c)
            hs.append(rmsnorm(y, self.mtp_norm))
        ce0 = self.ce(hs[0], self.head, labels[0], mask[0])
        mtp = sum(self.ce(hs[k], self.head, labels[k], mask[k]) for k in range(1, D + 1))
        J = (ce0 + C["mtp_scale"] / D * mtp + aux_total) / M
        if mtp_counts:
            counts.append(torch.stack(mtp_counts).sum(0))
        return J, ce0.detach(), counts


# ---------------------------------------------------------------- data
def make_batches(n, gen):
    """n microbatches of (ids[0..D], labels[0..D], mask[0..D]) with the MTP shifts."""
    out = []
    for _ in range(n):
        x = torch.randint(1, V, (B, S + 1), generator=gen)
        ids, lab, msk = [x[:, :S]], [x[:, 1:]], [torch.ones(B, S)]
        z = torch.zeros(B, 1, dtype=x.dtype)
        for k in range(1, D + 1):
            ids.append(torch.cat([ids[-1][:, 1:], z], 1))
            lab.append(torch.cat([lab[-1][:, 1:], z], 1))
            msk.append(torch.cat([msk[-1][:, 1:], torch.zeros(B, 1)], 1))
        out.append(tuple([t.to(DEV, non_blocking=True) for t in ts] for ts in (ids, lab, msk)))
    return out


# ---------------------------------------------------------------- step
def lr_at(s):
    c = C
    if c["warmup_sched"] > 0 and s <= c["warmup_sched"]:
        return c["lr"] * s / c["warmup_sched"]
    span = TOTAL_STEPS - c["warmup_sched"]
    prog = min(1.0, (s - c["warmup_sched"]) / span) if span > 0 else 1.0
    return c["min_lr"] + 0.5 * (c["lr"] - c["min_lr"]) * (1 + math.cos(math.pi * prog))


def model_flops_per_token():
    # Approximate: 6 * (active non-embedding matmul params + head params, counting
    # every call: L decoder layers, D MTP layer calls incl. eh_proj, D+1 head calls)
    # + attention 12 * L_eff * S * H (QK^T and AV, fwd+bwd, full square - causal
    # masking halves the real work, as in the usual MFU convention). Norms,
    # RoPE, softmax, router and the optimizer are not counted.
    def layer(moe):
        attn = 4 * H * H
        mlp = (K * 3 * H * FF + H * E) if moe else 3 * H * FF
        return attn + mlp
    dec = sum(layer(l in C["moe_layers"]) for l in range(L))
    mtp = D * (2 * H * H + layer((L - 1) in C["moe_layers"]))
    head = (D + 1) * H * V
    return 6 * (dec + mtp + head) + 12 * (L + D) * S * H


# ---------------------------------------------------------------- profile
# Kernel-name patterns -> categories, first match wins. Attention comes
# before GEMM because the mem-efficient kernels are named fmha_cutlass*;
# inductor's kernels (triton_*) before GEMM because a fused pointwise name
# lists the ops it came from, except its GEMM templates (triton_tem_*mm*).
# The aten:: patterns serve the CPU-only report (op names, not kernels).
ATTN_PATTERNS = ("flash", "fmha", "attention", "sdpa")
ATTN_BWD_PATTERNS = ("bwd", "backward", "bprop", "cutlassb", "dgrad")
GEMM_PATTERNS = ("gemm", "gemv", "cutlass", "sm90_xmma", "nvjet", "cublas", "matmul", "_mm",
                 "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
OPT_PATTERNS = ("multi_tensor", "fused_adam", "adam", "_foreach_")
MEM_PATTERNS = ("memset", "memcpy")
CATEGORIES = ("GEMM", "attention fwd", "attention bwd", "triton fused", "optimizer", "memset/memcpy", "other")


def kernel_category(name):
    n = name.lower()
    if any(p in n for p in ATTN_PATTERNS):
        return "attention bwd" if any(p in n for p in ATTN_BWD_PATTERNS) else "attention fwd"
    if any(p in n for p in MEM_PATTERNS):
        return "memset/memcpy"
    if n.startswith("triton_"):
        return "GEMM" if n.startswith("triton_tem_") and "mm" in n else "triton fused"
    if any(p in n for p in GEMM_PATTERNS):
        return "GEMM"
    if any(p in n for p in OPT_PATTERNS):  # the fused AdamW, and clip_grad_norm_'s foreach kernels
        return "optimizer"
    return "other"


def device_us(evt):
    # the attribute this PyTorch has: device_* since 2.4, cuda_* before
    for attr in ("self_device_time_total", "device_time_total", "self_cuda_time_total", "cuda_time_total"):
        v = getattr(evt, attr, None)
        if v is not None:
            return v
    return 0


def is_device_kernel(evt):
    # device-side activity (kernels, memcpy, memset) as opposed to CPU ops;
    # gpu_user_annotation ranges (record_function, torch.compile's regions)
    # are projected onto the GPU timeline too and would count kernels twice
    if getattr(evt, "is_user_annotation", False) or getattr(evt, "is_async", False):
        return False
    dt = getattr(evt, "device_type", None)
    return dt is not None and str(dt).split(".")[-1] == "CUDA"


def write_profile(prof, path, nsteps, wall_ms, timed_med_ms):
    """The report: per-step totals, categories, top kernels. Device kernel
    times where the trace has CUDA events, else CPU op self-times."""
    per = {}  # name -> [calls, us]
    spans = []
    for evt in prof.events():
        if is_device_kernel(evt):
            us = device_us(evt)
            acc = per.setdefault(evt.name, [0, 0.0])
            acc[0] += 1
            acc[1] += us
            tr = getattr(evt, "time_range", None)
            if tr is not None:
                spans.append((tr.start, tr.end))
    device = bool(per)
    if not device:
        # no CUDA activity (a CPU run): CPU ops by self time, which sums to
        # the time spent in ops without counting a parent and its children
        for avg in prof.key_averages():
            if avg.self_cpu_time_total > 0:
                per[avg.key] = [avg.count, float(avg.self_cpu_time_total)]
    total_ms = sum(us for _, us in per.values()) / 1e3 / nsteps
    what = "kernel" if device else "CPU op self"
    lines = [
        "# torch_peer profile: mode %s, preset %s, moe %s, B%d x M%d, S%d, V%d, torch %s" % (
            args.mode, "tiny" if args.tiny else "gpu-small", bool(C["moe_layers"]), B, M, S, V, torch.__version__),
        "# %d steps profiled after the %d timed/warm-up ones; every figure is per step (total / %d)" % (
            nsteps, TOTAL_STEPS, nsteps),
        "# source: " + ("CUDA device events (kernels, memcpy, memset)" if device else
                        "CPU op self-times: no CUDA events in the trace (a CPU-only run), so NOT kernel times"),
        "",
        "step wall under the profiler   %9.3f ms  (profiler overhead included)" % wall_ms,
        "step wall unprofiled (median)  %9.3f ms  (the JSON's step_ms_median)" % timed_med_ms,
        "%-30s %9.3f ms  (%.1f%% of the unprofiled step)" % (
            what + " time total", total_ms, 100.0 * total_ms / timed_med_ms if timed_med_ms > 0 else float("nan")),
    ]
    if device and spans:
        # the union of the kernel intervals: equal to the total on one stream,
        # less where streams overlap; the rest of the step the GPU idles
        spans.sort()
        busy, cur_s, cur_e = 0.0, None, None
        for a, b in spans:
            if cur_e is None or a > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        busy += cur_e - cur_s
        busy_ms = busy / 1e3 / nsteps
        lines.append("%-30s %9.3f ms  (%.1f%% of the unprofiled step; the rest the GPU idles)" % (
            "GPU busy (kernel union)", busy_ms, 100.0 * busy_ms / timed_med_ms if timed_med_ms > 0 else float("nan")))
    cat = dict.fromkeys(CATEGORIES, 0.0)
    for name, (_, us) in per.items():
        cat[kernel_category(name)] += us / 1e3 / nsteps
    lines += ["", "%-16s %10s %7s" % ("category", "ms/step", "share")]
    for c in CATEGORIES:
        lines.append("%-16s %10.3f %6.1f%%" % (c, cat[c], 100.0 * cat[c] / total_ms if total_ms > 0 else 0.0))
    top = sorted(per.items(), key=lambda kv: -kv[1][1])[:40]
    lines += ["", "top %d %ss by total time" % (len(top), "kernel" if device else "CPU op"),
              "%-90s %10s %10s %10s  %s" % ("name", "calls/step", "ms/call", "ms/step", "category")]
    for name, (calls, us) in top:
        lines.append("%-90s %10.2f %10.4f %10.3f  %s" % (
            name[:90], calls / nsteps, us / 1e3 / calls, us / 1e3 / nsteps, kernel_category(name)))
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    model = Model().to(DEV)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": C["wd"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=C["lr"], betas=C["betas"], eps=C["adam_eps"], fused=IS_CUDA)
    moe_layers = [l for l in model.layers if l.moe] + ([model.trm] if model.trm.moe else [])

    fwd = model
    if WHOLE:
        # the whole microbatch forward as one graph (backward through AOT
        # autograd): what a user compiling their model would write
        fwd = torch.compile(model)
    if args.mode == "compile":
        # Whole-model compilation recompiles every step (the MoE split sizes
        # change: round two measured 15 s per step), so compile the
        # fixed-shape regions: each layer's attention and dense MLP halves
        # and the head + cross-entropy. One code object serves all layers.
        import torch._dynamo as dyn
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dyn.config, name):
                setattr(dyn.config, name, 64)
        for layer in list(model.layers) + [model.trm]:
            layer.attention = torch.compile(layer.attention)
            if not layer.moe:
                layer.dense_mlp = torch.compile(layer.dense_mlp)
        model.ce = torch.compile(Model.ce)

    gen = torch.Generator().manual_seed(args.seed)
    batches = make_batches(TOTAL_STEPS * M, gen)

    def step(s):
        opt.zero_grad(set_to_none=True)
        counts_sum = None
        loss = torch.zeros((), device=DEV)
        for mb in range(M):
            ids, lab, msk = batches[(s - 1) * M + mb]
            with torch.autocast(DEV.type, dtype=torch.bfloat16):
                J, ce0, counts = fwd(ids, lab, msk)
            J.backward()
            loss = loss + ce0 / M
            if counts:
                counts_sum = counts if counts_sum is None else [a + b for a, b in zip(counts_sum, counts)]
        torch.nn.utils.clip_grad_norm_(model.parameters(), C["clip"], foreach=IS_CUDA)
        lr = lr_at(s)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        # DeepSeek-V3 aux-loss-free balancing: bias += rate * sign(mean(c) - c)
        if counts_sum:
            with torch.no_grad():
                for layer, c in zip(moe_layers, counts_sum):
                    c = c.float()
                    layer.expert_bias += C["bias_rate"] * torch.sign(c.mean() - c)
        return loss

    losses, times = [], []
    for s in range(1, TOTAL_STEPS + 1):
        sync()
        t0 = time.perf_counter()
        loss = step(s)
        sync()
        dt = time.perf_counter() - t0
        losses.append(loss)
        if s > args.warmup:
            times.append(dt)
    losses = [float(x) for x in losses]
    med = statistics.median(times) if times else float("nan")
    tok = B * S * M
    # the result is taken before any profiling, so the profiled steps change
    # none of it (peak memory included)
    result = {
        "mode": args.mode,
        "preset": "tiny" if args.tiny else "gpu-small",
        "moe": not args.no_moe,
        "moe_path": ("grouped_mm" if GROUPED_MOE else "per-expert loop") if C["moe_layers"] else None,
        "shape": {"B": B, "M": M, "V": V, "S": S},
        "deterministic": DETERMINISTIC,
        "tokens_per_s": tok / med,
        "step_ms_median": med * 1e3,
        "step_ms": [round(t * 1e3, 2) for t in times],
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2 ** 30 if IS_CUDA else None,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "params": nparams,
        "model_flops_per_token": model_flops_per_token(),
        "steps_timed": len(times),
        "torch": torch.__version__,
    }
    if args.profile_out:
        result["profile_out"] = profile(step, batches, gen, med * 1e3)
    emit(result)


def profile(step, batches, gen, timed_med_ms):
    """PROFILE_STEPS more steps (the same step(), on fresh batches past the
    timed ones) under torch.profiler; writes the report and returns its path,
    or None when profiling failed: the timed result is still worth emitting."""
    try:
        from torch.profiler import ProfilerActivity, profile as tprofile
        batches += make_batches(PROFILE_STEPS * M, gen)  # drawn now, so the timed steps' data is as it was
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if IS_CUDA else [])
        walls = []
        with tprofile(activities=acts) as prof:
            for s in range(TOTAL_STEPS + 1, TOTAL_STEPS + PROFILE_STEPS + 1):
                sync()
                t0 = time.perf_counter()
                step(s)  # the LR schedule holds at min_lr past TOTAL_STEPS
                sync()
                walls.append(time.perf_counter() - t0)
        write_profile(prof, args.profile_out, PROFILE_STEPS, statistics.mean(walls) * 1e3, timed_med_ms)
        return args.profile_out
    except Exception as e:  # noqa: BLE001 - any failure here must not cost the timing line
        import traceback
        traceback.print_exc()
        print("torch_peer: profiling failed (%s); no report written" % e, file=sys.stderr)
        return None


if __name__ == "__main__":
    main()
