#!/usr/bin/env python3
"""hf_trainer_layout.py — a plain PyTorch training loop that keeps its
checkpoints in the Hugging Face Trainer's layout, checked by `resumecheck
run --trainer exec`. No transformers dependency: the files are written the
way the Trainer writes them, by the loop's own code; resumecheck adds only
the exec flags, the trace and the census (docs/pytorch.md, "Examples").

OUT/ckpt/iter_%07d/ (the Trainer's checkpoint-<step>/) holds:

  model.safetensors   the weights (safetensors, metadata {"format": "pt"});
                      pytorch_model.bin (torch.save) where safetensors is not installed
  optimizer.pt        optimizer.state_dict() (AdamW)
  scheduler.pt        the LR scheduler's state_dict() (warmup + cosine over --steps)
  scaler.pt           the GradScaler's state_dict() (torch.amp.GradScaler("cpu"))
  rng_state.pth       the dict the Trainer saves: python, numpy, cpu (and cuda
                      where CUDA is available) generator states
  trainer_state.json  global_step, epoch, log_history (loss, learning_rate,
                      grad_norm per optimizer update), as the Trainer writes it
  training_args.bin   torch.save of the arguments: run-specific (paths, the leg),
                      which `run` reports as differing by construction
  grad_accum.pt       this loop's own: the gradients accumulated so far and
                      the number of microbatches they hold (below)
  COMPLETE            last

One step of this loop is one microbatch (forward and backward); the
optimizer updates every --grad-accum steps, and global_step counts those
updates, as the Trainer's does. A save may fall inside an accumulation
window (the Trainer saves only after an update; a hand-written loop that
counts microbatches often does not), so the loop keeps the window in
grad_accum.pt and restores it. The data is the Trainer's: a sampler
seeded per epoch (accelerate's SeedableRandomSampler), read through a
DataLoader without a generator, whose iterator draws its base seed from
the global torch RNG; a resumed run skips the batches of the epoch it
already read and restores the RNG after that (the Trainer's order), so
the draw of the skipping iterator is overwritten.

    resumecheck run --trainer exec --steps 6 --save-at 3 --out runs/hf \\
      --train-cmd 'python3 examples/hf_trainer_layout.py --steps {steps} --stop-at {stop_at}
                   --save-at {save_at} --resume-from={resume_from} --out {out}'

--bug NAME plants a resume bug:
  grad-scaler-not-saved  scaler.pt is not written: a resumed leg starts
                         with a fresh loss scale
  loader-rng-after-load  the RNG is restored before the epoch's iterator is
                         made, which then draws its base seed from the
                         restored generator
  accum-counter-reset    the accumulated gradients are restored but the count
                         of microbatches in the window is not: the resumed
                         leg updates one microbatch late
"""

import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402

BUGS = ("none", "grad-scaler-not-saved", "loader-rng-after-load", "accum-counter-reset")


def atomic_write(path, write):
    """write(tmp), fsync, rename: a file is whole or absent. write is a
    function of the temporary path, or the bytes themselves."""
    tmp = path + ".tmp"
    if isinstance(write, bytes):
        with open(tmp, "wb") as f:
            f.write(write)
    else:
        write(tmp)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.rename(tmp, path)


class SeedableRandomSampler:
    """accelerate's SeedableRandomSampler: a permutation seeded by seed + epoch,
    so an epoch's order does not depend on the global generators."""

    def __init__(self, n, seed, torch):
        self.n, self.seed, self.epoch, self.torch = n, seed, 0, torch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = self.torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(self.torch.randperm(self.n, generator=g).tolist())

    def __len__(self):
        return self.n


class GradAccumulation:
    """The accumulation window: how many microbatches the gradients hold
    (the counter the loop keeps), and the gradients themselves."""

    def __init__(self, model):
        self.model, self.microbatches = model, 0

    def state_dict(self):
        return {"microbatches": self.microbatches, "grads": {n: p.grad for n, p in self.model.named_parameters()}}

    def load_state_dict(self, sd, counter=True):
        for n, p in self.model.named_parameters():
            g = sd["grads"].get(n)
            p.grad = None if g is None else g.clone()
        if counter:
            self.microbatches = int(sd["microbatches"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--grad-accum", type=int, default=2, help="microbatches per optimizer update")
    p.add_argument("--batch", type=int, default=8, help="samples per microbatch")
    args = resumecheck.exec_args(parser=p)
    if args.grad_accum < 1:
        p.error("--grad-accum must be at least 1")

    try:
        import torch
    except ImportError as e:
        print(f"hf_trainer_layout: torch is needed: {e}", file=sys.stderr)
        return 70
    try:
        import safetensors.torch as st  # the Trainer's default weights format
    except ImportError:
        st = None
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    # the Trainer's set_seed: every generator, before the model is built
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    g = np.random.default_rng(args.seed)  # the task: fixed data, not the global generators
    n_samples, d_in, n_cls, hidden = 40, 12, 4, 32
    data_x = torch.from_numpy(g.standard_normal((n_samples, d_in)).astype(np.float32))
    data_y = torch.from_numpy((data_x.numpy() @ g.standard_normal((d_in, n_cls))).argmax(1))
    model = torch.nn.Sequential()
    model.add_module("dense", torch.nn.Linear(d_in, hidden))
    model.add_module("act", torch.nn.GELU())
    model.add_module("dropout", torch.nn.Dropout(0.1))  # the torch RNG is state
    model.add_module("classifier", torch.nn.Linear(hidden, n_cls))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    updates = math.ceil(args.steps / args.grad_accum)  # the horizon in updates: from --steps, never --stop-at
    warmup = max(1, updates // 4)

    def lr_lambda(t):  # the Trainer's cosine schedule with warmup, counting from 1
        if t < warmup:
            return (t + 1) / warmup
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (t - warmup) / max(1, updates - warmup))))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    # growth every update, so the scale is state that changes during the test
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)
    accum = GradAccumulation(model)
    sampler = SeedableRandomSampler(n_samples, args.seed, torch)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data_x, data_y), batch_size=args.batch, sampler=sampler, drop_last=True)
    per_epoch = len(loader)  # microbatches per epoch
    log_history = []
    position = {"epoch": 0, "microbatches_into_epoch": 0}  # where the loop reads

    # The census reads what the checkpoint holds (and the generators,
    # which rng_state.pth holds): registered as watch=, never saved by resumecheck.
    watch = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler, "grad_accum": accum, "data": position}
    rc = resumecheck.register(args, {}, watch=watch)

    def save(step):
        d = os.path.join(resumecheck.ckpt_root(args.out), "iter_%07d" % step)
        os.makedirs(d)
        sd = model.state_dict()
        if st is not None:
            atomic_write(os.path.join(d, "model.safetensors"), lambda t: st.save_file(sd, t, metadata={"format": "pt"}))
        else:
            atomic_write(os.path.join(d, "pytorch_model.bin"), lambda t: torch.save(sd, t))
        for name, obj in (("optimizer.pt", optimizer), ("scheduler.pt", scheduler), ("scaler.pt", scaler), ("grad_accum.pt", accum)):
            if name == "scaler.pt" and args.bug == "grad-scaler-not-saved":
                continue
            state = obj.state_dict()
            atomic_write(os.path.join(d, name), lambda t, state=state: torch.save(state, t))
        rng = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.random.get_rng_state_all()
        atomic_write(os.path.join(d, "rng_state.pth"), lambda t: torch.save(rng, t))
        trainer_state = {
            "best_metric": None,
            "best_model_checkpoint": None,
            "epoch": step / per_epoch,
            "eval_steps": 500,
            "global_step": step // args.grad_accum,
            "is_hyper_param_search": False,
            "is_local_process_zero": True,
            "is_world_process_zero": True,
            "log_history": log_history,
            "logging_steps": 1,
            "max_steps": updates,
            "num_input_tokens_seen": 0,
            "num_train_epochs": math.ceil(args.steps / per_epoch),
            "save_steps": 500,
            "total_flos": 0.0,
            "train_batch_size": args.batch,
            "trial_name": None,
            "trial_params": None,
        }
        text = json.dumps(trainer_state, indent=2, sort_keys=True) + "\n"  # the Trainer's save_to_json
        atomic_write(os.path.join(d, "trainer_state.json"), text.encode("utf-8"))
        atomic_write(os.path.join(d, "training_args.bin"), lambda t: torch.save(args, t))
        atomic_write(os.path.join(d, "COMPLETE"), b"hf-trainer-layout\n")
        rc.saved(step)  # the census after the save

    def restore_rng(d):
        rng = torch.load(os.path.join(d, "rng_state.pth"), weights_only=False)  # numpy's state is a pickled array
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.random.set_rng_state(rng["cpu"])

    start, data_iter = 1, None
    if args.resume_from:
        d = args.resume_from
        weights = os.path.join(d, "model.safetensors")
        if os.path.exists(weights):
            if st is None:
                print("hf_trainer_layout: the checkpoint holds model.safetensors: pip install safetensors", file=sys.stderr)
                return 66
            model.load_state_dict(st.load_file(weights))
        else:
            model.load_state_dict(torch.load(os.path.join(d, "pytorch_model.bin"), weights_only=True))
        optimizer.load_state_dict(torch.load(os.path.join(d, "optimizer.pt"), weights_only=True))
        scheduler.load_state_dict(torch.load(os.path.join(d, "scheduler.pt"), weights_only=True))
        if os.path.exists(os.path.join(d, "scaler.pt")):  # the Trainer loads it when it is there
            scaler.load_state_dict(torch.load(os.path.join(d, "scaler.pt"), weights_only=True))
        window = torch.load(os.path.join(d, "grad_accum.pt"), weights_only=True)
        accum.load_state_dict(window, counter=args.bug != "accum-counter-reset")
        with open(os.path.join(d, "trainer_state.json"), encoding="utf-8") as f:
            trainer_state = json.load(f)
        log_history = trainer_state["log_history"]
        k = trainer_state["global_step"] * args.grad_accum + int(window["microbatches"])  # microbatches done
        position["epoch"], position["microbatches_into_epoch"] = divmod(k, per_epoch)
        sampler.set_epoch(position["epoch"])
        if args.bug == "loader-rng-after-load" or position["microbatches_into_epoch"] == 0:
            restore_rng(d)  # the loop below makes the epoch's iterator, drawing from the restored RNG
        else:
            # the Trainer's order: the epoch's iterator, the batches already
            # read skipped, then the RNG restored (overwriting the draw)
            data_iter = iter(loader)
            for _ in range(position["microbatches_into_epoch"]):
                next(data_iter)
            restore_rng(d)
        start = rc.loaded(k)  # the census after the load
    else:
        sampler.set_epoch(0)

    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr", "loss_scale"), ints=("global_step",))
    for step in range(start, args.stop_at + 1):
        if data_iter is None or position["microbatches_into_epoch"] == per_epoch:
            if data_iter is not None:  # the epoch is over
                position["epoch"], position["microbatches_into_epoch"] = position["epoch"] + 1, 0
                sampler.set_epoch(position["epoch"])
            data_iter = iter(loader)  # draws its base seed from the global torch RNG
            if args.bug == "loader-rng-after-load" and position["microbatches_into_epoch"]:
                for _ in range(position["microbatches_into_epoch"]):  # the skip, after the RNG was restored
                    next(data_iter)
        x, y = next(data_iter)
        position["microbatches_into_epoch"] += 1
        rc.before_step(step)  # just before the first forward
        model.train()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss / args.grad_accum).backward()
        accum.microbatches += 1
        lr = optimizer.param_groups[0]["lr"]
        loss_scale = scaler.get_scale()
        grad_norm = 0.0
        if accum.microbatches == args.grad_accum:  # the window is full: one update
            scaler.unscale_(optimizer)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            accum.microbatches = 0
            log_history.append({"epoch": step / per_epoch, "grad_norm": grad_norm, "learning_rate": lr, "loss": loss.item(), "step": step // args.grad_accum})
        trace.row(step, loss=loss.item(), grad_norm=grad_norm, lr=lr, loss_scale=loss_scale, global_step=step // args.grad_accum)
        if step in args.save_at:
            save(step)
    trace.close()
    print(f"hf_trainer_layout: trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"hf_trainer_layout: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
