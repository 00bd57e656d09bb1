#!/usr/bin/env python3
"""torch_bisect_trainer.py — a small deterministic PyTorch trainer for the
tests of `resumecheck bisect` on exec runs (tests/bisect_exec_*.sh,
docs/bisect.md "PyTorch trainers").

A residual model named like a transformer's modules (embed, blocks.0.attn,
blocks.0.mlp, blocks.1.attn, blocks.1.mlp, head) learns a fixed synthetic
task on the CPU in about a second a leg, with the resumecheck package's
checkpoints, trace, census and bisect events (resumecheck.events.install,
one line). Each attn module keeps a running scale of its projection's output
in a buffer its forward updates and reads; an epoch-shuffling sampler picks
each step's batch from the data position (consumed_samples).

--bug NAME plants a resume bug:
  stale-buffer  the attn modules' running scale is a non-persistent buffer:
                not in the checkpoint, so a resumed process starts it afresh
                and blocks.0.attn's forward is the first call that differs
  data-order    the sampler restarts its epoch on resume: the data position
                is restored, but the resumed process reads the epoch's
                first batches again
"""

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402
from resumecheck import census, checkpoint  # noqa: E402
from resumecheck import events  # noqa: E402

BUGS = ("none", "stale-buffer", "data-order")
N_SAMPLES, D_IN, D, N_CLS, BATCH = 64, 8, 16, 4, 8


def build(torch, bug):
    nn = torch.nn

    class Attn(nn.Module):
        """A projection scaled by the running mean of its output's square."""

        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(D, D)
            self.register_buffer("scale", torch.ones(()), persistent=bug != "stale-buffer")

        def forward(self, x):
            y = self.proj(x)
            if self.training:
                with torch.no_grad():
                    self.scale.mul_(0.9).add_(0.1 * y.pow(2).mean())
            return y / self.scale.sqrt()

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(D, D)
            self.act = nn.GELU()
            self.dropout = nn.Dropout(0.1)

        def forward(self, x):
            return self.dropout(self.act(self.fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attn()
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.attn(x)
            return x + self.mlp(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(D_IN, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(D, N_CLS)

        def forward(self, x):
            x = self.embed(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return Model()


def batch_indices(consumed, restarted_at):
    """The next batch of an epoch-shuffling sampler at data position
    `consumed`; the bug's sampler, restarted at `restarted_at`, counts its
    position in the epoch from there."""
    epoch, pos = divmod(consumed, N_SAMPLES)
    if restarted_at is not None:
        pos = (consumed - restarted_at) % N_SAMPLES
    perm = np.random.default_rng(1000 + epoch).permutation(N_SAMPLES)
    return perm[pos : pos + BATCH]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    args = resumecheck.exec_args(parser=p)

    import torch

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    g = np.random.default_rng(7)
    data_x = torch.from_numpy(g.standard_normal((N_SAMPLES, D_IN)).astype(np.float32))
    data_y = torch.from_numpy((data_x.numpy() @ g.standard_normal((D_IN, N_CLS))).argmax(1))

    torch.manual_seed(1234)
    np.random.seed(1234)
    random.seed(1234)  # every global generator is in the checkpoint: seed them all
    model = build(torch, args.bug)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    def schedule(t):  # over the horizon --steps, never --stop-at
        return 0.5 * (1 + math.cos(math.pi * t / args.steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    consumed, start, restart = 0, 1, None
    root = resumecheck.ckpt_root(args.out)

    def census_fields(step):
        return census.torch_fields(step, model, optimizer, scheduler, None, {"consumed_samples": consumed})

    if args.resume_from:
        st = checkpoint.load(args.resume_from, model=model, optimizer=optimizer, scheduler=scheduler)
        start = st["iteration"] + 1
        consumed = int(st["data_position"]["consumed_samples"])
        if args.bug == "data-order":
            restart = consumed  # the sampler starts its epoch over
        census.write(args.out, st["iteration"], census_fields(st["iteration"]))

    events.install(model, optimizer, start_step=start)  # bisect's event log (off unless RC_EVENTS)
    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr"), ints=("consumed_samples",))
    for step in range(start, args.stop_at + 1):
        model.train()
        idx = torch.from_numpy(batch_indices(consumed, restart))
        x, y = data_x[idx], data_y[idx]
        if os.environ.get("RC_TEST_NO_BATCH_EVENT") != "1":  # test switch: the data-order test's control
            events.batch((x, y), samples=consumed)
        lr = optimizer.param_groups[0]["lr"]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        consumed += BATCH
        trace.row(step, loss=loss.item(), grad_norm=grad_norm.item(), lr=lr, consumed_samples=consumed)
        if step in args.save_at:
            checkpoint.save(root, step, model=model, optimizer=optimizer, scheduler=scheduler,
                            data_position={"consumed_samples": consumed}, args={"leg": args.leg, "bug": args.bug})
            if step < args.steps:
                census.write(args.out, step, census_fields(step))
    trace.close()
    print(f"torch_bisect_trainer: leg {args.leg or '?'} trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"torch_bisect_trainer: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
