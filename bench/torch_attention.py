#!/usr/bin/env python3
"""torch_attention.py - the attention kernels' peer: PyTorch SDPA (flash
backend on the H200) at gpu-small's attention shape, bf16, causal.

Prints one JSON line: forward and backward ms per call (median of 20, after
warmup), to set beside RC_PROFILE=ops's attention_forward/backward ms/call.
The core's kernels read fp32 q/k/v and write fp32 results, SDPA reads and
writes bf16; that difference is part of what is compared, as it is in a step.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

P = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
P.add_argument("--batch", type=int, default=8)
P.add_argument("--seq", type=int, default=1024)
P.add_argument("--heads", type=int, default=12)
P.add_argument("--head-dim", type=int, default=64)
args = P.parse_args()

B, S, NH, HD = args.batch, args.seq, args.heads, args.head_dim
q, k, v = (torch.randn(B, NH, S, HD, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
dout = torch.randn(B, NH, S, HD, device="cuda", dtype=torch.bfloat16)


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


fwd_ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
bwd_ms = timed(lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True))
flop_fwd = 2 * B * NH * S * S * HD  # causal: half of 4*B*NH*S^2*HD
print(json.dumps({"peer": "torch_sdpa", "torch": torch.__version__, "B": B, "S": S, "nh": NH, "hd": HD,
                  "fwd_ms": round(fwd_ms, 4), "bwd_ms": round(bwd_ms, 4),
                  "fwd_tflops": round(flop_fwd / fwd_ms / 1e9, 1), "bwd_tflops": round(2.5 * flop_fwd / bwd_ms / 1e9, 1)}))
