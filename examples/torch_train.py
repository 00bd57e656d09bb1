#!/usr/bin/env python3
"""torch_train.py — a small deterministic PyTorch trainer for `resumecheck run
--trainer exec`, using the resumecheck Python package (docs/pytorch.md).

A 2-layer MLP with dropout (so the torch RNG state matters) learns a fixed
synthetic classification task on the CPU. A torch DataLoader reads the
batches through a Stateful batch sampler that starts at the data position
(consumed_samples); numpy's global RNG adds input noise and Python's random
picks a per-step label-smoothing amount, so all three generators are state a
resume must restore. AdamW with a warmup + cosine LR schedule over the
horizon --steps, a GradScaler, and an EMA of the weights
(torch.optim.swa_utils.AveragedModel). Every one of them is registered once
(resumecheck.register), which saves, loads and censuses them.

    resumecheck run --trainer exec --steps 6 --save-at 3 --out runs/py \\
      --train-cmd 'python3 examples/torch_train.py --steps {steps} --stop-at {stop_at}
                   --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}'

--bug NAME plants a resume bug:
  optimizer-not-saved    the load leaves the optimizer fresh (Adam moments
                         and step count lost)
  rng-not-restored       the load leaves every RNG as the fresh process seeded it
  scheduler-not-restored the load leaves the LR schedule at step 0
  ema-not-saved          the EMA is updated every step but is not in the
                         checkpoint (registered for the census only): a resumed
                         leg starts it afresh; the losses do not show it
  loader-rng-after-load  a resumed leg creates its DataLoader iterator after
                         the load, and the iterator draws its base seed from
                         the restored torch RNG: the census right after the
                         load is clean, the one before the first step is not
"""

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402

BUGS = ("none", "optimizer-not-saved", "rng-not-restored", "scheduler-not-restored", "ema-not-saved", "loader-rng-after-load")


class ConsumedSamplesSampler:
    """Batches of sample indices from the data position on, in order
    (Megatron's pretraining sampler, simplified). Stateful: its state is
    consumed_samples, read at every batch, so a load after the DataLoader's
    iterator was made still takes effect."""

    def __init__(self, n_samples, batch):
        self.n_samples, self.batch, self.consumed_samples = n_samples, batch, 0

    def __iter__(self):
        while True:
            start = self.consumed_samples
            self.consumed_samples += self.batch
            yield [(start + i) % self.n_samples for i in range(self.batch)]

    def state_dict(self):
        return {"consumed_samples": self.consumed_samples}

    def load_state_dict(self, sd):
        self.consumed_samples = int(sd["consumed_samples"])


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
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
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
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    sampler = ConsumedSamplesSampler(n_samples, args.batch)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data_x, data_y), batch_sampler=sampler)

    # Register every piece of state once: saved at --save-at, loaded from
    # --resume-from, and censused after the save, after the load and before
    # the first step after either.
    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler, "ema": ema, "sampler": sampler}
    watch = {}
    if args.bug == "ema-not-saved":  # still updated and censused, but left out of the checkpoint
        watch["ema"] = state.pop("ema")
    rc = resumecheck.register(args, state, watch=watch, census=args.census == "on", save_args={"bug": args.bug})

    # The iterator draws its base seed from the global torch RNG when it is
    # made: before the load, as in the leg that saved (before its first step).
    data_iter = iter(loader) if args.bug != "loader-rng-after-load" else None
    not_loaded = {"optimizer-not-saved": "optimizer", "scheduler-not-restored": "scheduler"}.get(args.bug)
    start = rc.resume(
        state={k: v for k, v in state.items() if k != not_loaded},
        rng=args.bug != "rng-not-restored",
    )
    if data_iter is None:
        data_iter = iter(loader)

    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr", "loss_scale"), ints=("consumed_samples",))
    for step in range(start, args.stop_at + 1):
        model.train()
        xb, yb = next(data_iter)
        x = xb + torch.from_numpy(np.random.normal(0.0, 0.05, (args.batch, d_in)).astype(np.float32))
        smoothing = 0.1 * random.random()
        lr = optimizer.param_groups[0]["lr"]
        loss_scale = scaler.get_scale() if scaler.is_enabled() else 1.0
        rc.before_step(step)  # just before the first forward
        loss = torch.nn.functional.cross_entropy(model(x), yb, label_smoothing=smoothing)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        ema.update_parameters(model)
        trace.row(
            step, loss=loss.item(), grad_norm=grad_norm.item(), lr=lr, loss_scale=loss_scale, consumed_samples=sampler.consumed_samples
        )
        rc.after_step(step)  # saves at --save-at
    trace.close()
    print(f"torch_train: leg {args.leg or '?'} trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"torch_train: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
