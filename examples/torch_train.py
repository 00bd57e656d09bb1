#!/usr/bin/env python3
"""torch_train.py — a small deterministic PyTorch trainer for `resumecheck run
--trainer exec`, using the resumecheck Python package (docs/pytorch.md).

A 2-layer MLP with dropout (so the torch RNG state matters) learns a fixed
synthetic classification task on the CPU. Each step's batch is chosen from
the data position (consumed_samples); numpy's global RNG adds input noise
and Python's random picks a per-step label-smoothing amount, so all three
generators are state a resume must restore. AdamW with a warmup + cosine
LR schedule over the horizon --steps, and a GradScaler.

    resumecheck run --trainer exec --steps 6 --save-at 3 --out runs/py \\
      --train-cmd 'python3 examples/torch_train.py --steps {steps} --stop-at {stop_at}
                   --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}'

--bug NAME plants a resume bug:
  optimizer-not-saved   the load leaves the optimizer fresh (Adam moments
                        and step count lost)
  rng-not-restored      the load leaves every RNG as the fresh process seeded it
  scheduler-not-restored the load leaves the LR schedule at step 0
"""

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402
from resumecheck import census, checkpoint  # noqa: E402

BUGS = ("none", "optimizer-not-saved", "rng-not-restored", "scheduler-not-restored")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--grad-scaler", choices=("on", "off"), default="on")
    p.add_argument("--census", choices=("on", "off"), default="on")
    args = resumecheck.exec_args(parser=p)

    try:
        import torch
    except ImportError as e:
        print(f"torch_train: torch is not importable: {e}", file=sys.stderr)
        return 70
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # reductions in one fixed order; legs share the cores

    # The task: fixed data from its own generator, not the global ones.
    g = np.random.default_rng(args.seed)
    n_samples, d_in, n_cls = 256, 8, 4
    data_x = torch.from_numpy(g.standard_normal((n_samples, d_in)).astype(np.float32))
    data_y = torch.from_numpy((data_x.numpy() @ g.standard_normal((d_in, n_cls))).argmax(1))

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(d_in, args.hidden))
    model.add_module("act", torch.nn.GELU())
    model.add_module("dropout", torch.nn.Dropout(0.2))
    model.add_module("fc2", torch.nn.Linear(args.hidden, n_cls))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 5)

    def schedule(t):  # t = steps taken; the horizon is --steps, never --stop-at
        if t < warmup:
            return (t + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (t - warmup) / max(1, args.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, enabled=args.grad_scaler == "on")
    consumed = 0
    start = 1
    root = resumecheck.ckpt_root(args.out)

    def census_fields(step):
        return census.torch_fields(
            step, model, optimizer, scheduler, scaler if scaler.is_enabled() else None, {"consumed_samples": consumed}
        )

    if args.resume_from:
        fresh_rng = checkpoint.rng_state()
        state = checkpoint.load(
            args.resume_from,
            model=model,
            optimizer=None if args.bug == "optimizer-not-saved" else optimizer,
            scheduler=None if args.bug == "scheduler-not-restored" else scheduler,
            scaler=scaler,
            rng=args.bug != "rng-not-restored",
        )
        if args.bug == "rng-not-restored":
            checkpoint.set_rng_state(fresh_rng)
        consumed = int(state["data_position"]["consumed_samples"])
        start = state["iteration"] + 1
        if args.census == "on":
            census.write(args.out, state["iteration"], census_fields(state["iteration"]))

    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr", "loss_scale"), ints=("consumed_samples",))
    for step in range(start, args.stop_at + 1):
        model.train()
        idx = torch.arange(consumed, consumed + args.batch) % n_samples
        x = data_x[idx] + torch.from_numpy(np.random.normal(0.0, 0.05, (args.batch, d_in)).astype(np.float32))
        smoothing = 0.1 * random.random()
        lr = optimizer.param_groups[0]["lr"]
        loss_scale = scaler.get_scale() if scaler.is_enabled() else 1.0
        loss = torch.nn.functional.cross_entropy(model(x), data_y[idx], label_smoothing=smoothing)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        consumed += args.batch
        trace.row(step, loss=loss.item(), grad_norm=grad_norm.item(), lr=lr, loss_scale=loss_scale, consumed_samples=consumed)
        if step in args.save_at:
            checkpoint.save(
                root,
                step,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                scaler=scaler,
                data_position={"consumed_samples": consumed},
                args={"leg": args.leg, "bug": args.bug},
            )
            if step < args.steps and args.census == "on":
                census.write(args.out, step, census_fields(step))
    trace.close()
    print(f"torch_train: leg {args.leg or '?'} trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"torch_train: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
