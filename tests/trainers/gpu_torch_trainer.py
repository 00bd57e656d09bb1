#!/usr/bin/env python3
"""gpu_torch_trainer.py — a small GPT on a GPU whose kernels are not bitwise
deterministic, for `resumecheck run --trainer exec --noise calibrated` on a
device (docs/exec-trainer.md, "Trainers that are not deterministic";
bench/bench_noise_gpu.sh, tests/gpu_noise_torch.sh).

tests/trainers/noisy_torch_trainer.py fakes its noise on the CPU (a sum
order drawn per process); this trainer has the noise a real GPU trainer
has, from the kernels PyTorch picks by default, with nothing planted:

  - the token embedding is looked up with weight.index_select(0, ids):
    its backward is index_add_, which sums the gradients of a repeated
    token with atomicAdd on CUDA, in the order the blocks run. The token
    stream is Zipf-distributed, so frequent tokens repeat hundreds of
    times per batch (three or more addends are needed for the order to
    matter);
  - causal attention through torch.nn.functional.scaled_dot_product_attention
    with the default backends (flash or memory-efficient under bf16
    autocast, whose backward is not bitwise deterministic either);
  - torch.use_deterministic_algorithms(False), said explicitly, so an
    environment that turns determinism on cannot hide the noise.

The rest is an ordinary small trainer whose state a resume must carry:
AdamW, a warmup + cosine LambdaLR over --steps, dropout (the CUDA RNG),
a label-smoothing amount from Python's random, a Stateful sampler at the
data position, gradient accumulation over --microbatches, gradient
clipping, an optionally tied head. All of it is registered once
(resumecheck.register), as in noisy_torch_trainer.py, so the checkpoints,
the census and the trace columns (TraceWriter exact= lr, consumed_samples,
batch; noisy= loss, grad_norm) are the same as that trainer's.

The default size (d=256, S=256, B=8, vocab 4096, 2 layers) makes a step a
few milliseconds on an H100, so a leg's time is its start-up (import
torch, CUDA init); each leg prints both on stderr (its log.txt).
--device cpu runs the same code on the CPU (deterministic there, in
practice), for checking the plumbing without a GPU; --d-model, --seq,
--vocab shrink it for that.

--bug NAME plants the same resume bugs as noisy_torch_trainer.py:
  scheduler-not-restored  the load leaves the LR schedule at step 0
  optimizer-not-saved     the load leaves the optimizer fresh
  rng-not-restored        the load leaves every RNG as the fresh process seeded it
  sampler-not-restored    the load leaves the sampler at data position 0
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # before the imports: the start-up a leg pays

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402

BUGS = ("none", "scheduler-not-restored", "optimizer-not-saved", "rng-not-restored", "sampler-not-restored")


class Sampler:
    """Sample indices from the data position on (Stateful: consumed_samples)."""

    def __init__(self, n: int, batch: int) -> None:
        self.n, self.batch, self.consumed_samples = n, batch, 0

    def next(self) -> list[int]:
        start = self.consumed_samples
        self.consumed_samples += self.batch
        return [(start + i) % self.n for i in range(self.batch)]

    def state_dict(self) -> dict[str, int]:
        return {"consumed_samples": self.consumed_samples}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.consumed_samples = int(sd["consumed_samples"])


def make_tokens(seed: int, n: int, length: int, vocab: int) -> np.ndarray:
    """n sequences of length tokens from a fixed generator: each token follows
    its predecessor by a fixed map half the time (something to learn), else
    is a fresh Zipf draw (a skewed unigram: the repeats that make the
    embedding backward's atomic sums order-dependent)."""
    g = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    rank_to_token = g.permutation(vocab)
    follow = g.permutation(vocab)
    draws = rank_to_token[g.choice(vocab, size=(n, length), p=p)]
    keep = g.random((n, length)) < 0.5
    out = np.empty((n, length), dtype=np.int64)
    out[:, 0] = draws[:, 0]
    for i in range(1, length):
        out[:, i] = np.where(keep[:, i], follow[out[:, i - 1]], draws[:, i])
    return out


def build_model(torch: Any, args: argparse.Namespace) -> Any:
    """The GPT; the torch import is the caller's (its failure is reported
    as the trainer's, exit 70)."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, p: float) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(p)

        def forward(self, x: Any) -> Any:
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            # the default backends: whichever kernel PyTorch picks for the
            # device and dtype, as a trainer that does not pin one gets
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, s, d)))
            return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = args.d_model
            self.wte = nn.Embedding(args.vocab, d)
            self.wpe = nn.Parameter(torch.randn(args.seq, d) * 0.02)
            nn.init.normal_(self.wte.weight, std=0.02)
            self.drop = nn.Dropout(args.dropout)
            self.blocks = nn.ModuleList(Block(d, args.heads, args.dropout) for _ in range(args.layers))
            self.ln_f = nn.LayerNorm(d)
            self.head = None if args.tie_head == "on" else nn.Linear(d, args.vocab, bias=False)

        def forward(self, ids: Any) -> Any:
            b, s = ids.shape
            # index_select, not F.embedding: its backward is index_add_
            # (atomics on CUDA), the nondeterministic embedding backward
            # of many real trainers
            x = self.wte.weight.index_select(0, ids.reshape(-1)).view(b, s, -1) + self.wpe[:s]
            x = self.drop(x)
            for blk in self.blocks:
                x = blk(x)
            x = self.ln_f(x)
            return x @ self.wte.weight.t() if self.head is None else self.head(x)

    return GPT()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bug", choices=BUGS, default="none")
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (plumbing checks)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16", help="bf16: autocast, fp32 weights and optimizer")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=2)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--tie-head", choices=("on", "off"), default="on")
    p.add_argument("--samples", type=int, default=256, help="sequences in the synthetic data set")
    p.add_argument("--census", choices=("on", "off"), default="on")
    args = resumecheck.exec_args(parser=p)
    if args.batch % args.microbatches:
        p.error(f"--batch {args.batch} is not a multiple of --microbatches {args.microbatches}")
    if args.d_model % args.heads:
        p.error(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}")
    try:
        import torch
    except ImportError as e:
        print(f"gpu_torch_trainer: torch is not importable: {e}", file=sys.stderr)
        return 70
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"gpu_torch_trainer: --device {args.device}: torch.cuda.is_available() is False", file=sys.stderr)
        return 70
    # said explicitly: the point of this trainer is the default,
    # nondeterministic kernels, whatever the environment asked for
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    if device.type == "cuda":
        torch.cuda.init()
    t_ready = time.perf_counter()

    tokens = torch.from_numpy(make_tokens(args.seed, args.samples, args.seq + 1, args.vocab)).to(device)
    random.seed(args.seed)
    np.random.seed(args.seed)  # unused, but saved and censused with the other RNGs
    torch.manual_seed(args.seed)  # the CPU's and every GPU's generator: init, then dropout
    model = build_model(torch, args).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 5)

    def schedule(t: int) -> float:  # the horizon is --steps, never --stop-at
        if t < warmup:
            return (t + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (t - warmup) / max(1, args.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    sampler = Sampler(args.samples, args.batch)
    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "sampler": sampler}
    rc = resumecheck.register(
        args, state, census=args.census == "on", save_args={"bug": args.bug, "device": args.device, "precision": args.precision}
    )
    not_loaded = {"scheduler-not-restored": "scheduler", "optimizer-not-saved": "optimizer", "sampler-not-restored": "sampler"}
    start = rc.resume(state={k: v for k, v in state.items() if k != not_loaded.get(args.bug)}, rng=args.bug != "rng-not-restored")

    trace = resumecheck.trace.TraceWriter(
        args.out,
        floats=("loss", "grad_norm", "lr"),
        ints=("consumed_samples", "batch"),
        exact=("lr", "consumed_samples", "batch"),
        noisy=("loss", "grad_norm"),
    )
    mb = args.batch // args.microbatches
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    t_steps = time.perf_counter()
    t_train = 0.0
    for step in range(start, args.stop_at + 1):
        t0 = time.perf_counter()
        model.train()
        idx = sampler.next()
        batch_crc = zlib.crc32(np.asarray(idx, dtype=np.int64).tobytes())
        smoothing = 0.1 * random.random()
        lr = optimizer.param_groups[0]["lr"]
        rc.before_step(step)  # just before the first forward
        loss_sum = torch.zeros((), device=device)
        for m in range(args.microbatches):
            seqs = tokens[idx[m * mb : (m + 1) * mb]]
            with autocast:
                logits = model(seqs[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, args.vocab), seqs[:, 1:].reshape(-1), label_smoothing=smoothing
            )
            (loss / args.microbatches).backward()  # accumulates into .grad
            loss_sum += loss.detach() / args.microbatches
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        row = {"loss": loss_sum.item(), "grad_norm": grad_norm.item()}  # .item(): the step's one sync
        t_train += time.perf_counter() - t0
        trace.row(step, lr=lr, consumed_samples=sampler.consumed_samples, batch=batch_crc, **row)
        rc.after_step(step)  # saves at --save-at
    trace.close()
    t_end = time.perf_counter()
    n = args.stop_at - start + 1
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"gpu_torch_trainer: leg {args.leg or '?'} trained steps {start}..{args.stop_at} on {args.device} ({name}): "
        f"start-up {t_ready - T_START:.2f} s, set-up {t_steps - t_ready:.2f} s, "
        f"steps {t_train:.3f} s ({1000 * t_train / max(1, n):.1f} ms/step), saves and rest {t_end - t_steps - t_train:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except resumecheck.CheckpointError as e:
        print(f"gpu_torch_trainer: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
