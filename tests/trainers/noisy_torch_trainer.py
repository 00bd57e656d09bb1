#!/usr/bin/env python3
"""noisy_torch_trainer.py — a PyTorch trainer that is not bitwise
deterministic, on purpose, for `resumecheck run --trainer exec --noise
calibrated` (docs/exec-trainer.md, "Trainers that are not deterministic").

A 2-layer MLP with dropout learns a fixed synthetic task on the CPU:
AdamW, a warmup + cosine LambdaLR schedule over --steps, a Stateful sampler
at the data position, dropout from the torch RNG and a label-smoothing
amount from Python's random, all registered once (resumecheck.register).
Each step accumulates the gradients of --microbatches microbatches; with
--reduction-order shuffled (the default) they are summed in an order drawn
per process, from a generator of its own that no checkpoint holds, as an
all-reduce without a pinned algorithm reorders a float sum: two fresh runs
differ in the last bits from the first step on. --reduction-order fixed
sums them in index order (bitwise deterministic). --noise-scale S adds S x
a per-process normal draw, relative, to every gradient (noise too large to
decide, for the inconclusive verdict).

The trace declares its columns (resumecheck.trace.TraceWriter exact=,
noisy=): lr, consumed_samples and batch (a CRC-32 of the step's sample
indices: batch identity) exact; loss and grad_norm noisy.

--bug NAME plants a resume bug, as examples/torch_train.py does:
  scheduler-not-restored  the load leaves the LR schedule at step 0
  optimizer-not-saved     the load leaves the optimizer fresh
  rng-not-restored        the load leaves every RNG as the fresh process seeded it
  sampler-not-restored    the load leaves the sampler at data position 0
"""

import argparse
import math
import os
import random
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402

BUGS = ("none", "scheduler-not-restored", "optimizer-not-saved", "rng-not-restored", "sampler-not-restored")


class Sampler:
    """Sample indices from the data position on (Stateful: consumed_samples)."""

    def __init__(self, n, batch):
        self.n, self.batch, self.consumed_samples = n, batch, 0

    def next(self):
        start = self.consumed_samples
        self.consumed_samples += self.batch
        return [(start + i) % self.n for i in range(self.batch)]

    def state_dict(self):
        return {"consumed_samples": self.consumed_samples}

    def load_state_dict(self, sd):
        self.consumed_samples = int(sd["consumed_samples"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--reduction-order", choices=("shuffled", "fixed"), default="shuffled")
    p.add_argument("--noise-scale", type=float, default=0.0)
    p.add_argument("--census", choices=("on", "off"), default="on")
    args = resumecheck.exec_args(parser=p)
    try:
        import torch
    except ImportError as e:
        print(f"noisy_torch_trainer: torch is not importable: {e}", file=sys.stderr)
        return 70
    torch.set_num_threads(1)
    # the kernel noise: this process's own order, never saved (not the
    # trainer's RNG state, which a resume must restore)
    order_rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    g = np.random.default_rng(args.seed)
    n_samples, d_in, n_cls, hidden = 512, 16, 4, 64
    data_x = torch.from_numpy(g.standard_normal((n_samples, d_in)).astype(np.float32))
    data_y = torch.from_numpy((data_x.numpy() @ g.standard_normal((d_in, n_cls))).argmax(1))

    random.seed(args.seed)
    np.random.seed(args.seed)  # unused, but saved and censused with the other RNGs
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(d_in, hidden))
    model.add_module("act", torch.nn.GELU())
    model.add_module("dropout", torch.nn.Dropout(0.1))
    model.add_module("fc2", torch.nn.Linear(hidden, n_cls))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 5)

    def schedule(t):  # the horizon is --steps, never --stop-at
        if t < warmup:
            return (t + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (t - warmup) / max(1, args.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    sampler = Sampler(n_samples, args.batch)
    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "sampler": sampler}
    rc = resumecheck.register(args, state, census=args.census == "on", save_args={"bug": args.bug})
    not_loaded = {"scheduler-not-restored": "scheduler", "optimizer-not-saved": "optimizer", "sampler-not-restored": "sampler"}
    start = rc.resume(state={k: v for k, v in state.items() if k != not_loaded.get(args.bug)}, rng=args.bug != "rng-not-restored")

    trace = resumecheck.trace.TraceWriter(
        args.out,
        floats=("loss", "grad_norm", "lr"),
        ints=("consumed_samples", "batch"),
        exact=("lr", "consumed_samples", "batch"),
        noisy=("loss", "grad_norm"),
    )
    params = list(model.parameters())
    mb = args.batch // args.microbatches
    for step in range(start, args.stop_at + 1):
        model.train()
        idx = sampler.next()
        batch_crc = zlib.crc32(np.asarray(idx, dtype=np.int64).tobytes())
        smoothing = 0.1 * random.random()
        lr = optimizer.param_groups[0]["lr"]
        rc.before_step(step)  # just before the first forward
        grads, loss_sum = [], 0.0
        for m in range(args.microbatches):
            sel = idx[m * mb : (m + 1) * mb]
            loss = torch.nn.functional.cross_entropy(model(data_x[sel]), data_y[sel], label_smoothing=smoothing)
            grads.append(torch.autograd.grad(loss / args.microbatches, params))
            loss_sum += loss.item() / args.microbatches
        order = list(range(args.microbatches))
        if args.reduction_order == "shuffled":
            order_rng.shuffle(order)
        for k, param in enumerate(params):
            acc = torch.zeros_like(param)
            for m in order:  # float32 sums in this order: not associative
                acc = acc + grads[m][k]
            if args.noise_scale > 0:
                acc = acc * (1 + args.noise_scale * float(order_rng.gauss(0.0, 1.0)))
            param.grad = acc
        grad_norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        trace.row(step, loss=loss_sum, grad_norm=grad_norm.item(), lr=lr, consumed_samples=sampler.consumed_samples, batch=batch_crc)
        rc.after_step(step)  # saves at --save-at
    trace.close()
    print(f"noisy_torch_trainer: leg {args.leg or '?'} trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"noisy_torch_trainer: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
