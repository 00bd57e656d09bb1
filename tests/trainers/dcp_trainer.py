"""dcp_trainer.py — the smallest exec trainer that keeps its checkpoints in
torch.distributed.checkpoint (DCP) format, for tests/run_dcp.sh: an MLP
trained with AdamW on synthetic data, one process or several under
torchrun (gloo, FSDP2 sharding each layer, so every rank writes its own
__<rank>_0.distcp), a trace from rank 0, and checkpoints written by
dcp.save into OUT/ckpt/iter_%07d/ with COMPLETE last (rank 0, after a
barrier). `run` compares those directories by content (docs/compare.md,
"PyTorch formats").

--bug optimizer-not-loaded: a resumed leg loads the model but keeps a
fresh optimizer (the planted resume bug of the test). --format rc writes
the same state as resumecheck shards instead (checkpoint.save, one rank),
and --width sets the hidden size: bench/bench_torch_formats.sh times both.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

import resumecheck
from resumecheck.trace import TraceWriter


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bug", default="", choices=["", "optimizer-not-loaded"])
    p.add_argument("--format", default="dcp", choices=["dcp", "rc"])
    p.add_argument("--width", type=int, default=32)
    args = resumecheck.exec_args(parser=p)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.Tanh(), torch.nn.Linear(args.width, 8))
    if world > 1:
        from torch.distributed.fsdp import fully_shard  # noqa: PLC0415

        fully_shard(model[0])
        fully_shard(model[2])
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3) * (1 - s / (args.steps + 1)))
    start = 1
    if args.resume_from and args.format == "rc":
        st = resumecheck.checkpoint.load(args.resume_from, model=model, optimizer=opt, scheduler=sched, rng=False)
        start = st["iteration"] + 1
    elif args.resume_from:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd, "sched": sched.state_dict(), "step": 0}
        dcp.load(state, checkpoint_id=args.resume_from)
        if args.bug == "optimizer-not-loaded":
            set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=get_state_dict(model, opt)[1])
        else:
            set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        sched.load_state_dict(state["sched"])
        start = int(state["step"]) + 1
    trace = TraceWriter(args.out, floats=("loss", "grad_norm", "lr")) if rank == 0 else None
    g = torch.Generator().manual_seed(99)
    batches = [(torch.randn(64, 16, generator=g), torch.randn(64, 8, generator=g)) for _ in range(args.steps)]
    for step in range(start, args.stop_at + 1):
        x, y = batches[step - 1]
        per = x.shape[0] // world  # each rank its slice of the global batch
        x, y = x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        gn = gn.full_tensor() if hasattr(gn, "full_tensor") else gn
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        if world > 1:
            loss = loss.detach().clone()
            dist.all_reduce(loss)
            loss /= world
        if trace:
            trace.row(step, loss=float(loss), grad_norm=float(gn), lr=lr)
        if step in args.save_at and args.format == "rc":
            resumecheck.checkpoint.save(resumecheck.ckpt_root(args.out), step, model=model, optimizer=opt, scheduler=sched, rng=False)
        elif step in args.save_at:
            d = os.path.join(resumecheck.ckpt_root(args.out), "iter_%07d" % step)
            msd, osd = get_state_dict(model, opt)
            dcp.save({"model": msd, "optim": osd, "sched": sched.state_dict(), "step": step}, checkpoint_id=d)
            if world > 1:
                dist.barrier()
            if rank == 0:
                with open(os.path.join(d, "COMPLETE"), "w") as f:
                    f.write("dcp\n")
    if world > 1:
        # every rank done with gloo before any tears it down: a rank that
        # destroys the group while another's last collective is in flight
        # can die in gloo's threads at exit ("terminate called without an
        # active exception")
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
