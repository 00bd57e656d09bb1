#!/usr/bin/env python3
"""megatron_torch_dist_layout.py — a GPT trainer that keeps its checkpoints
in the layout of Megatron-LM's `torch_dist` format, checked by `resumecheck
run --trainer exec`: torch.distributed on gloo (one process, or several
under torchrun), data parallel with DDP, every file written and read by
the trainer's own code. resumecheck adds only the exec flags, the trace
and the census (docs/pytorch.md, "Examples").

OUT/ckpt/iter_%07d/ holds what Megatron's dist_checkpointing writes:

  .metadata, __<rank>_0.distcp  a torch.distributed.checkpoint of the sharded
                      state: the model under Megatron's names
                      (decoder.layers.0.self_attention.linear_qkv.weight, ...;
                      replicated across data-parallel ranks, so DCP keeps one
                      copy, written by one rank), and the distributed
                      optimizer's state (optimizer.state.exp_avg.<param>,
                      optimizer.state.exp_avg_sq.<param>) sharded across the
                      data-parallel ranks by rows: each rank's file holds its part
  common.pt           torch.save of the state that is not sharded: args (a plain
                      dict here, with consumed_train_samples), checkpoint_version,
                      iteration, num_floating_point_operations_so_far,
                      opt_param_scheduler, rng_state (one entry per data-parallel
                      rank: random, numpy and torch generator states) and the
                      optimizer's param_groups and step
  metadata.json       {"sharded_backend": "torch_dist", ...}
  COMPLETE            last (the exec contract's marker; Megatron has none)

and OUT/ckpt/latest_checkpointed_iteration.txt, Megatron's tracker, is
rewritten after each save. `run` compares the iter_* directories (the
tracker is not one, and is not compared); the resumed leg loads the
directory it is given (Megatron's --load with --ckpt-step), not the one the
tracker names, since a save leg of `--save-at 3,6` stops at 6.

    resumecheck run --trainer exec --steps 4 --save-at 2 --out runs/megatron \\
      --train-cmd 'python3 -m torch.distributed.run --standalone --nproc-per-node 2
                   examples/megatron_torch_dist_layout.py --steps {steps} --stop-at {stop_at}
                   --save-at {save_at} --resume-from={resume_from} --out {out}'

Megatron's own args also hold the run's paths (--save, --load), which
differ between legs; they are left out of args here (the exec contract
keeps such facts in args.json), and args is a dict, not an
argparse.Namespace (which `compare-torch` loads only with --unsafe-pickle).

--bug NAME plants a resume bug:
  step-off-by-one           the loaded iteration is taken as the step about to
                            run (K+1): the resumed leg skips a step
  scheduler-not-saved       common.pt is written without opt_param_scheduler:
                            a resumed leg restarts the LR schedule
  dropout-rng-not-restored  the loaded rng_state restores the random and numpy
                            generators but not torch's, which dropout draws from
"""

import argparse
import contextlib
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402

BUGS = ("none", "step-off-by-one", "scheduler-not-saved", "dropout-rng-not-restored")
TRACKER = "latest_checkpointed_iteration.txt"


class OptimizerParamScheduler:
    """Megatron's OptimizerParamScheduler, reduced: linear warmup then cosine
    decay, counted in samples (num_steps grows by the global batch size)."""

    def __init__(self, optimizer, max_lr, min_lr, lr_warmup_steps, lr_decay_steps):
        self.optimizer = optimizer
        self.max_lr, self.min_lr = float(max_lr), float(min_lr)
        self.lr_warmup_steps, self.lr_decay_steps = int(lr_warmup_steps), int(lr_decay_steps)
        self.lr_decay_style = "cosine"
        self.num_steps = 0
        self.step(0)

    def get_lr(self):
        if self.lr_warmup_steps > 0 and self.num_steps <= self.lr_warmup_steps:
            return self.max_lr * self.num_steps / self.lr_warmup_steps
        ratio = min(1.0, (self.num_steps - self.lr_warmup_steps) / max(1, self.lr_decay_steps - self.lr_warmup_steps))
        return self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (math.cos(math.pi * ratio) + 1.0)

    def step(self, increment):
        self.num_steps += increment
        lr = self.get_lr()
        for g in self.optimizer.param_groups:
            g["lr"] = lr

    def state_dict(self):
        return {
            "max_lr": self.max_lr,
            "lr_warmup_steps": self.lr_warmup_steps,
            "num_steps": self.num_steps,
            "lr_decay_style": self.lr_decay_style,
            "lr_decay_steps": self.lr_decay_steps,
            "min_lr": self.min_lr,
        }

    def load_state_dict(self, sd):
        for k in ("max_lr", "min_lr", "lr_warmup_steps", "lr_decay_steps", "lr_decay_style"):
            if sd[k] != getattr(self, k):  # Megatron checks the class values against the checkpoint's
                raise ValueError(f"opt_param_scheduler: {k} is {getattr(self, k)!r} here, {sd[k]!r} in the checkpoint")
        self.num_steps = 0
        self.step(int(sd["num_steps"]))


def build_model(torch, args):
    """A GPT with Megatron's module names (Transformer Engine's layer specs)."""
    import torch.nn.functional as F  # noqa: N812, PLC0415
    from torch import nn  # noqa: PLC0415

    h, heads, vocab, seq = args.hidden_size, 4, args.vocab_size, args.seq_length

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_qkv = nn.Linear(h, 3 * h)
            self.linear_proj = nn.Linear(h, h)
            self.attention_dropout = nn.Dropout(0.1)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.linear_qkv(x).view(b, t, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(h // heads)
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            probs = self.attention_dropout(scores.masked_fill(mask, float("-inf")).softmax(-1))
            return self.linear_proj((probs @ v).transpose(1, 2).reshape(b, t, h))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_fc1, self.linear_fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            return self.linear_fc2(F.gelu(self.linear_fc1(x)))

    class TransformerLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.pre_mlp_layernorm = nn.LayerNorm(h), nn.LayerNorm(h)
            self.self_attention, self.mlp = SelfAttention(), MLP()
            self.hidden_dropout = nn.Dropout(0.1)

        def forward(self, x):
            x = x + self.hidden_dropout(self.self_attention(self.input_layernorm(x)))
            return x + self.hidden_dropout(self.mlp(self.pre_mlp_layernorm(x)))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(TransformerLayer() for _ in range(args.num_layers))
            self.final_layernorm = nn.LayerNorm(h)

    class Embedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, h), nn.Embedding(seq, h)
            self.embedding_dropout = nn.Dropout(0.1)

    class GPTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.decoder = Embedding(), Decoder()
            self.output_layer = nn.Linear(h, vocab, bias=False)

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1])
            x = self.embedding.embedding_dropout(self.embedding.word_embeddings(tokens) + self.embedding.position_embeddings(pos))
            for layer in self.decoder.layers:
                x = layer(x)
            return self.output_layer(self.decoder.final_layernorm(x))

    return GPTModel()


def init_distributed(dist):
    """gloo under torchrun (its environment), else a one-rank group of its own
    (an in-process store: no port, so legs never collide)."""
    if "MASTER_ADDR" in os.environ and "RANK" in os.environ:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def get_rng_state(torch):
    """Megatron's rng_state entry of this rank (no CUDA generators here)."""
    return {"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(), "torch_rng_state": torch.get_rng_state()}


def write_atomic(path, write):
    """write(tmp), fsync, rename: the file is whole or absent."""
    tmp = path + ".tmp"
    write(tmp)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.rename(tmp, path)


def write_text(path, text):
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomic(path, w)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--micro-batch-size", type=int, default=2)
    p.add_argument("--global-batch-size", type=int, default=8)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--hidden-size", type=int, default=32)
    p.add_argument("--seq-length", type=int, default=16)
    p.add_argument("--vocab-size", type=int, default=64)
    args = resumecheck.exec_args(parser=p)

    try:
        import torch
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
    except ImportError as e:
        print(f"megatron_torch_dist_layout: torch with torch.distributed is needed: {e}", file=sys.stderr)
        return 70
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rank, world = init_distributed(dist)
    if args.global_batch_size % (args.micro_batch_size * world):
        p.error(f"--global-batch-size {args.global_batch_size} is not a multiple of micro batch {args.micro_batch_size} x {world} ranks")
    num_microbatches = args.global_batch_size // (args.micro_batch_size * world)
    mesh = init_device_mesh("cpu", (world,))

    # Megatron's _set_random_seed: the model initialised alike on every
    # rank, then each data-parallel rank its own generators (--data-parallel-random-init)
    torch.manual_seed(args.seed)
    model = build_model(torch, args)
    seed = args.seed + 10 * rank
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0, betas=(0.9, 0.95), weight_decay=0.01)
    samples = args.steps * args.global_batch_size  # the horizon: --steps (train_iters), never --stop-at
    scheduler = OptimizerParamScheduler(optimizer, max_lr=3e-3, min_lr=3e-4, lr_warmup_steps=args.global_batch_size, lr_decay_steps=samples)
    # Megatron keeps these in args; the loop reads and advances them
    train_state = {"iteration": 0, "consumed_train_samples": 0, "num_floating_point_operations_so_far": 0}
    params = dict(model.named_parameters())
    param_of = {id(p): n for n, p in params.items()}

    g = torch.Generator().manual_seed(args.seed + 1)
    dataset = torch.randint(0, args.vocab_size, (96, args.seq_length + 1), generator=g)  # token sequences

    def microbatch(consumed, m):
        """Megatron's MegatronPretrainingSampler: the global batch from
        consumed_train_samples on; this rank's slice of microbatch m."""
        start = consumed + (m * world + rank) * args.micro_batch_size
        return dataset[[(start + i) % len(dataset) for i in range(args.micro_batch_size)]]

    def sharded_state_dict():
        """The state dist_checkpointing shards: the model (replicated: one
        copy kept) and the optimizer's moments, split by rows across ranks."""
        sd = {n: p.detach() for n, p in model.state_dict(keep_vars=True).items()}
        for n, p in params.items():
            st = optimizer.state.get(p)
            for key in ("exp_avg", "exp_avg_sq"):
                full = st[key] if st else torch.zeros_like(p)
                sd[f"optimizer.state.{key}.{n}"] = distribute_tensor(full.detach(), mesh, [Shard(0)], src_data_rank=None)
        return sd

    def common_state(rng_states):
        """common.pt: what is not sharded."""
        sd = {
            "args": {
                "num_layers": args.num_layers,
                "hidden_size": args.hidden_size,
                "seq_length": args.seq_length,
                "micro_batch_size": args.micro_batch_size,
                "global_batch_size": args.global_batch_size,
                "train_iters": args.steps,
                "seed": args.seed,
                "data_parallel_size": world,
                "consumed_train_samples": train_state["consumed_train_samples"],
                "consumed_valid_samples": 0,
            },
            "checkpoint_version": 3.0,
            "iteration": train_state["iteration"],
            "num_floating_point_operations_so_far": train_state["num_floating_point_operations_so_far"],
            "rng_state": rng_states,
            "optimizer": {
                "param_groups": [{k: v for k, v in gr.items() if k != "params"} for gr in optimizer.param_groups],
                "step": {param_of[id(p)]: float(st["step"]) for p, st in optimizer.state.items()},
            },
        }
        if args.bug != "scheduler-not-saved":
            sd["opt_param_scheduler"] = scheduler.state_dict()
        return sd

    # The census reads what the checkpoint holds (the generators too, which
    # rng_state holds): registered as watch=, never saved by resumecheck.
    watch = {"model": model, "optimizer": optimizer, "opt_param_scheduler": scheduler, "train_state": train_state}
    rc = resumecheck.register(args, {}, watch=watch)

    def save_checkpoint(iteration):
        root = resumecheck.ckpt_root(args.out)
        d = os.path.join(root, "iter_%07d" % iteration)
        rng_states = [None] * world
        dist.all_gather_object(rng_states, get_rng_state(torch))  # rank 0 keeps every rank's
        dcp.save(sharded_state_dict(), checkpoint_id=d)
        dist.barrier()  # every rank's file written
        if rank == 0:
            write_atomic(os.path.join(d, "common.pt"), lambda t: torch.save(common_state(rng_states), t))
            write_text(os.path.join(d, "metadata.json"), '{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}')
            write_text(os.path.join(d, "COMPLETE"), "torch_dist\n")
            write_text(os.path.join(root, TRACKER), f"{iteration}\n")
        dist.barrier()
        rc.saved(iteration)  # the census after the save

    def load_checkpoint(d):
        sd = sharded_state_dict()
        dcp.load(sd, checkpoint_id=d)
        with torch.no_grad():
            for n, t in model.state_dict(keep_vars=True).items():
                t.copy_(sd[n])
        common = torch.load(os.path.join(d, "common.pt"), weights_only=False)  # numpy's RNG state is a pickled array
        for gr, saved in zip(optimizer.param_groups, common["optimizer"]["param_groups"]):
            gr.update(saved)
        for n, p in params.items():
            optimizer.state[p] = {
                "step": torch.tensor(common["optimizer"]["step"][n]),
                "exp_avg": sd[f"optimizer.state.exp_avg.{n}"].full_tensor(),
                "exp_avg_sq": sd[f"optimizer.state.exp_avg_sq.{n}"].full_tensor(),
            }
        if "opt_param_scheduler" in common:  # Megatron loads it when it is there
            scheduler.load_state_dict(common["opt_param_scheduler"])
        rng = common["rng_state"][rank]
        random.setstate(rng["random_rng_state"])
        np.random.set_state(rng["np_rng_state"])
        if args.bug != "dropout-rng-not-restored":
            torch.set_rng_state(rng["torch_rng_state"])
        train_state["consumed_train_samples"] = common["args"]["consumed_train_samples"]
        train_state["num_floating_point_operations_so_far"] = common["num_floating_point_operations_so_far"]
        train_state["iteration"] = common["iteration"] + (1 if args.bug == "step-off-by-one" else 0)
        return common["iteration"]

    if args.resume_from:
        rc.loaded(load_checkpoint(args.resume_from))  # the census after the load
    tokens_per_iter = args.global_batch_size * args.seq_length
    flops_per_iter = 6 * sum(p.numel() for p in params.values()) * tokens_per_iter
    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr"), ints=("consumed_train_samples",)) if rank == 0 else None
    first = train_state["iteration"] + 1
    while train_state["iteration"] < args.stop_at:
        step = train_state["iteration"] + 1
        batches = [microbatch(train_state["consumed_train_samples"], m) for m in range(num_microbatches)]
        rc.before_step(step)  # just before the first forward
        ddp.train()
        optimizer.zero_grad(set_to_none=True)
        lr = optimizer.param_groups[0]["lr"]
        loss_sum = torch.zeros(())
        for m, mb in enumerate(batches):
            ctx = ddp.no_sync() if m < num_microbatches - 1 else contextlib.nullcontext()  # all-reduce once, at the last
            with ctx:
                logits = ddp(mb[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), mb[:, 1:].reshape(-1)) / num_microbatches
                loss.backward()
            loss_sum += loss.detach()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        optimizer.step()
        train_state["iteration"] = step
        train_state["consumed_train_samples"] += args.global_batch_size
        train_state["num_floating_point_operations_so_far"] += flops_per_iter
        scheduler.step(increment=args.global_batch_size)
        dist.all_reduce(loss_sum)
        if trace:
            trace.row(step, loss=float(loss_sum) / world, grad_norm=grad_norm, lr=lr, consumed_train_samples=train_state["consumed_train_samples"])
        if step in args.save_at:
            save_checkpoint(step)
    if trace:
        trace.close()
    dist.barrier()
    dist.destroy_process_group()
    print(f"megatron_torch_dist_layout: rank {rank}/{world} trained iterations {first}..{args.stop_at}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"megatron_torch_dist_layout: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
