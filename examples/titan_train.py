#!/usr/bin/env python3
"""titan_train.py — a TorchTitan-style trainer checked by `resumecheck run
--trainer exec`: torch.distributed on gloo (one process, or several under
torchrun), FSDP2 (`fully_shard` on every block and the root), checkpoints
in torch.distributed.checkpoint (DCP) format, written and read by the
trainer's own code. resumecheck adds only the exec flags, the trace and
the census (docs/pytorch.md, "Examples").

The state is TorchTitan's dict of Stateful objects, saved with one
dcp.save and loaded with one dcp.load:

  app          AppState: the model and the AdamW optimizer through
               get_state_dict / set_state_dict (sharded DTensors)
  lr_scheduler warmup + cosine LambdaLR over --steps (never --stop-at)
  dataloader   torchdata's StatefulDataLoader over a DistributedSampler,
               with generator= (so no draw from the global torch RNG), its
               state under dp_rank_<r> as TorchTitan's ParallelAwareDataloader
               keeps it (a nested dict here, where TorchTitan pickles it: the
               census and the comparison then name its fields)
  ema          an exponential moving average of the (sharded) weights
  train_state  the step, the epoch of the sampler and the tokens seen
  rng          this rank's torch generator (the model has dropout)

Each step accumulates gradients over 2 microbatches, clips them to norm
1.0 and steps AdamW, the scheduler and the EMA. The checkpoint of step K
is OUT/ckpt/iter_%07d/ (.metadata and one __<rank>_0.distcp per rank);
rank 0 writes COMPLETE after a barrier. The same dict is registered with
resumecheck (watch=: censused, not saved by it), and rc.saved(K) /
rc.loaded(K) / rc.before_step(step) write the census where the trainer
saved, loaded, and just before the first forward after either.

    resumecheck run --trainer exec --steps 4 --save-at 2 --out runs/titan \\
      --train-cmd 'python3 -m torch.distributed.run --standalone --nproc-per-node 2
                   examples/titan_train.py --steps {steps} --stop-at {stop_at}
                   --save-at {save_at} --resume-from={resume_from} --out {out}'

Without torchrun it runs as one rank (a process group of its own, no port).

--bug NAME plants a resume bug:
  optimizer-not-loaded   AppState.load_state_dict restores the model only:
                         the optimizer keeps the moments of a fresh one
  ema-not-saved          the EMA is updated every step and censused, but left
                         out of the DCP state: a resumed leg starts it afresh
  sampler-epoch-restart  the data loader's state is not loaded: a resumed leg
                         reads its epoch from the first batch again
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import resumecheck  # noqa: E402

BUGS = ("none", "optimizer-not-loaded", "ema-not-saved", "sampler-epoch-restart")
ACCUM = 2  # microbatches per optimizer step


def build(args, torch, rank, world):
    """The model, its state objects and the data: everything the
    checkpoint holds, created the same way in every leg."""
    import torch.nn.functional as F  # noqa: N812, PLC0415
    from torch import nn  # noqa: PLC0415
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_model_state_dict, set_state_dict  # noqa: PLC0415
    from torch.distributed.fsdp import fully_shard  # noqa: PLC0415
    from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: PLC0415
    from torch.utils.data.distributed import DistributedSampler  # noqa: PLC0415

    vocab, dim, heads, n_layers, seq = 64, 32, 4, 2, 16

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (w(x).view(b, t, heads, dim // heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(b, t, dim))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w3 = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(dim, 2 * dim, bias=False)
            self.w2 = nn.Linear(2 * dim, dim, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
            self.attention, self.feed_forward = Attention(), FeedForward()
            self.dropout = nn.Dropout(0.1)  # draws from the torch RNG: the RNG is state

        def forward(self, x):
            x = x + self.dropout(self.attention(self.attention_norm(x)))
            return x + self.dropout(self.feed_forward(self.ffn_norm(x)))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleDict({str(i): TransformerBlock() for i in range(n_layers)})
            self.norm, self.output = nn.RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers.values():
                h = layer(h)
            return self.output(self.norm(h))

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = Transformer()
    for layer in model.layers.values():
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 4)

    def schedule(t):  # t = steps taken; the horizon is --steps, never --stop-at
        if t < warmup:
            return (t + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (t - warmup) / max(1, args.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

    class AppState:
        """The PyTorch DCP recipe's AppState: the model and the optimizer as
        one Stateful, their state dicts from get_state_dict (DTensor shards)."""

        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        def state_dict(self):
            model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
            return {"model": model_sd, "optim": optim_sd}

        def load_state_dict(self, sd):
            if args.bug == "optimizer-not-loaded":  # the planted bug: the model only
                set_model_state_dict(self.model, sd["model"])
                return
            set_state_dict(self.model, self.optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])

    class EMA:
        """An exponential moving average of the weights, sharded as they are."""

        def __init__(self, model, decay=0.9):
            self.decay = decay
            self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

        @torch.no_grad()
        def update(self, model):
            for n, p in model.named_parameters():
                self.shadow[n].lerp_(p.detach(), 1.0 - self.decay)

        def state_dict(self):
            return {"shadow": self.shadow}

        def load_state_dict(self, sd):
            with torch.no_grad():
                for n, t in sd["shadow"].items():
                    self.shadow[n].copy_(t)

    class TrainState:
        """TorchTitan's TrainState: the counters the loop keeps."""

        def __init__(self):
            self.step, self.epoch, self.ntokens_seen = 0, 0, 0

        def state_dict(self):
            return {"step": self.step, "epoch": self.epoch, "ntokens_seen": self.ntokens_seen}

        def load_state_dict(self, sd):
            self.step, self.epoch, self.ntokens_seen = int(sd["step"]), int(sd["epoch"]), int(sd["ntokens_seen"])

    class RNGState:
        """This rank's torch generator, under a key of its own: DCP keeps one
        copy of a value every rank saves under the same key."""

        def state_dict(self):
            return {f"rank_{rank}": torch.get_rng_state()}

        def load_state_dict(self, sd):
            torch.set_rng_state(sd[f"rank_{rank}"])

    class ParallelAwareDataloader(StatefulDataLoader):
        """TorchTitan's data loader: each data-parallel rank's state under its
        own key, so the ranks' positions are all kept."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._rank_id = f"dp_rank_{rank}"

        def state_dict(self):
            return {self._rank_id: super().state_dict(), "world_size": world}

        def load_state_dict(self, sd):
            if sd.get("world_size") != world:
                raise ValueError(f"data loader state of {sd.get('world_size')} ranks, this job has {world}")
            super().load_state_dict(sd[self._rank_id])

    # the data: fixed token sequences (next-token prediction), from their
    # own generator; 48 sequences make an epoch of 3 steps on 2 ranks
    g = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, vocab, (48, seq + 1), generator=g)
    dataset = torch.utils.data.TensorDataset(tokens)
    # torch's DistributedSampler: the loader fast-forwards it at iter(), so its
    # state right after a load is the saved one. torchdata 0.11's
    # StatefulDistributedSampler restores its position only at the first
    # batch: between a load and that batch its state_dict() says 0 (a
    # checkpoint taken there restarts the epoch), and the census after the
    # load says so.
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = ParallelAwareDataloader(
        dataset, batch_size=args.micro_batch, sampler=sampler, drop_last=True, generator=torch.Generator().manual_seed(args.seed + 2)
    )
    states = {
        "app": AppState(model, optimizer),
        "lr_scheduler": scheduler,
        "dataloader": loader,
        "ema": EMA(model),
        "train_state": TrainState(),
        "rng": RNGState(),
    }
    return model, optimizer, scheduler, sampler, loader, states


def init_distributed(dist):
    """gloo under torchrun (its environment), else a one-rank group of its own
    (an in-process store: no port, so legs never collide)."""
    if "MASTER_ADDR" in os.environ and "RANK" in os.environ:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def write_complete(d):
    """COMPLETE, last: written whole under another name, then renamed."""
    tmp = os.path.join(d, ".COMPLETE.tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write("torch.distributed.checkpoint\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(d, "COMPLETE"))
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per microbatch and rank")
    args = resumecheck.exec_args(parser=p)

    try:
        import torch
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        import torchdata  # noqa: F401 (the StatefulDataLoader)
    except ImportError as e:
        print(f"titan_train: torch and torchdata are needed: {e}", file=sys.stderr)
        return 70
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # reductions in one fixed order; legs share the cores
    rank, world = init_distributed(dist)

    model, optimizer, scheduler, sampler, loader, states = build(args, torch, rank, world)
    train_state, ema = states["train_state"], states["ema"]
    torch.manual_seed(args.seed + 100 * rank)  # each rank its own dropout masks (TorchTitan seeds per rank alike)

    # What the trainer checkpoints; the census reads all of it (and, with the
    # EMA left out of the checkpoint, the EMA too: the bug it catches).
    ckpt_states = dict(states)
    if args.bug == "ema-not-saved":
        del ckpt_states["ema"]
    rc = resumecheck.register(args, {}, watch=states, rng=False)  # the torch RNG is states["rng"]

    start = 1
    if args.resume_from:
        to_load = dict(ckpt_states)
        if args.bug == "sampler-epoch-restart":
            del to_load["dataloader"]  # the loader keeps its fresh position: the epoch's first batch
        dcp.load(to_load, checkpoint_id=args.resume_from)
    sampler.set_epoch(train_state.epoch)
    data_iter = iter(loader)  # a StatefulDataLoader's loaded state takes effect here
    if args.resume_from:
        start = rc.loaded(train_state.step)  # the census after the load, iterator made

    def next_microbatch():
        nonlocal data_iter
        try:
            return next(data_iter)[0]
        except StopIteration:  # the epoch is over: the next one, reshuffled
            train_state.epoch += 1
            sampler.set_epoch(train_state.epoch)
            data_iter = iter(loader)
            return next(data_iter)[0]

    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr"), ints=("epoch", "ntokens_seen")) if rank == 0 else None
    for step in range(start, args.stop_at + 1):
        model.train()
        microbatches = [next_microbatch() for _ in range(ACCUM)]
        rc.before_step(step)  # just before the first forward
        optimizer.zero_grad(set_to_none=True)
        lr = scheduler.get_last_lr()[0]
        loss_sum = torch.zeros(())
        for mb in microbatches:
            logits = model(mb[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), mb[:, 1:].reshape(-1)) / ACCUM
            loss.backward()
            loss_sum += loss.detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        optimizer.step()
        scheduler.step()
        ema.update(model)
        dist.all_reduce(loss_sum)
        train_state.step = step
        train_state.ntokens_seen += ACCUM * args.micro_batch * (microbatches[0].shape[1] - 1) * world
        if trace:
            trace.row(step, loss=float(loss_sum) / world, grad_norm=float(grad_norm), lr=lr, epoch=train_state.epoch, ntokens_seen=train_state.ntokens_seen)
        if step in args.save_at:
            d = os.path.join(resumecheck.ckpt_root(args.out), "iter_%07d" % step)
            dcp.save(ckpt_states, checkpoint_id=d)
            dist.barrier()  # every rank's file written
            if rank == 0:
                write_complete(d)
            rc.saved(step)  # the census after the save
    if trace:
        trace.close()
    dist.barrier()
    dist.destroy_process_group()
    print(f"titan_train: rank {rank}/{world} trained steps {start}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"titan_train: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
