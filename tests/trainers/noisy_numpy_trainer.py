#!/usr/bin/env python3
"""noisy_numpy_trainer.py — a small exec trainer (numpy only, no torch:
quick to start) that is not bitwise deterministic, for the tests of `run
--noise calibrated` (docs/exec-trainer.md, "Trainers that are not
deterministic").

Linear regression with Adam on a fixed synthetic task. Each step's gradient
is a float32 sum of per-sample terms taken in an order drawn per process
(from a generator of its own that no checkpoint holds), as GPU atomics add
them: two fresh runs differ in the last bits. The checkpoint is
ckpt/iter_%07d/ with w.npy, exp_avg.npy, exp_avg_sq.npy (float32, compared
tensor by tensor), meta.json (step, consumed_samples: compared byte for
byte) and COMPLETE last. The trace (resumecheck.trace.TraceWriter) has
loss, grad_norm, lr and consumed_samples; --declare writes its kinds
(trace_columns.json: lr and consumed_samples exact, loss and grad_norm
noisy).

  --noise-scale S   add S x per-process normal draws to each step's gradient
                    (a kernel far noisier than a sum order): noise too
                    large to decide when S is large (with --sgd: Adam
                    would normalise it away)
  --sgd             plain SGD instead of Adam (the moments still saved)
  --lr-jitter       the learning rate itself varies per process by 1e-6:
                    a column every run must agree on does not (A/A fails)
  --loss-nudge X     a resumed process logs its loss X (relative) too high:
                    a deviation of a chosen size, under the noise's floor or
                    beyond it, with the state untouched
  --nudge-from LEG   only a process resumed from LEG's checkpoint (the leg
                    directory its --resume-from is under: through, aa, ...)
                    nudges: one process off, as a rounding flip makes one
  --nudge-legs LIST  only the legs so labelled (comma-separated, e.g.
                    resume@5,resume@5.aa) nudge: the first resume legs off,
                    the confirming ones (resume@5.2, ...) not
  --bug optimizer-not-saved   a load leaves Adam's moments at zero
  --bug data-not-saved        a load restarts the data at sample 0
"""

import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

import resumecheck  # noqa: E402


def write_ckpt(out, step, w, m, v, consumed):
    d = os.path.join(out, "ckpt", "iter_%07d" % step)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "w.npy"), w)
    np.save(os.path.join(d, "exp_avg.npy"), m)
    np.save(os.path.join(d, "exp_avg_sq.npy"), v)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"step": step, "consumed_samples": consumed}, f)
    with open(os.path.join(d, "COMPLETE"), "w") as f:
        f.write("ok\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--noise-scale", type=float, default=0.0)
    p.add_argument("--lr-jitter", action="store_true")
    p.add_argument("--declare", action="store_true")
    p.add_argument("--sgd", action="store_true")
    p.add_argument("--loss-nudge", type=float, default=0.0)
    p.add_argument("--nudge-from", default="")
    p.add_argument("--nudge-legs", default="")
    p.add_argument("--bug", choices=("none", "optimizer-not-saved", "data-not-saved"), default="none")
    p.add_argument("--batch", type=int, default=32)
    args = resumecheck.exec_args(parser=p)
    noise = random.Random(int.from_bytes(os.urandom(8), "little"))  # never saved: kernel noise

    g = np.random.default_rng(7)
    n, d = 512, 32
    x = g.standard_normal((n, d)).astype(np.float32)
    y = (x @ g.standard_normal(d).astype(np.float32) + 0.1 * g.standard_normal(n).astype(np.float32)).astype(np.float32)
    w = np.zeros(d, np.float32)
    m = np.zeros(d, np.float32)
    v = np.zeros(d, np.float32)
    consumed, start = 0, 1
    if args.resume_from:
        if not os.path.exists(os.path.join(args.resume_from, "COMPLETE")):
            print(f"noisy_numpy_trainer: {args.resume_from} has no COMPLETE", file=sys.stderr)
            return 65
        w = np.load(os.path.join(args.resume_from, "w.npy"))
        if args.bug != "optimizer-not-saved":
            m = np.load(os.path.join(args.resume_from, "exp_avg.npy"))
            v = np.load(os.path.join(args.resume_from, "exp_avg_sq.npy"))
        meta = json.load(open(os.path.join(args.resume_from, "meta.json")))
        start = int(meta["step"]) + 1
        consumed = 0 if args.bug == "data-not-saved" else int(meta["consumed_samples"])
    # the leg whose checkpoint this process loaded: <out>/<leg>/ckpt/iter_K
    source = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(args.resume_from)))) if args.resume_from else ""
    nudged = (not args.nudge_from or source == args.nudge_from) and (not args.nudge_legs or args.leg in args.nudge_legs.split(","))
    jitter = 1 + 1e-6 * noise.random() if args.lr_jitter else 1.0
    kw = {"exact": ("lr", "consumed_samples"), "noisy": ("loss", "grad_norm")} if args.declare else {}
    trace = resumecheck.trace.TraceWriter(args.out, floats=("loss", "grad_norm", "lr"), ints=("consumed_samples",), **kw)
    b1, b2, eps = 0.9, 0.95, 1e-8
    for step in range(start, args.stop_at + 1):
        lr = 0.05 * min(1.0, step / 2) * (0.5 + 0.5 * math.cos(math.pi * step / args.steps)) * jitter
        idx = [(consumed + i) % n for i in range(args.batch)]
        consumed += args.batch
        r = x[idx] @ w - y[idx]
        terms = (r[:, None] * x[idx]).astype(np.float32)  # per-sample gradients
        order = list(range(args.batch))
        noise.shuffle(order)
        grad = np.zeros(d, np.float32)
        for i in order:  # float32, in this process's order
            grad = grad + terms[i]
        grad = grad / np.float32(args.batch)
        if args.noise_scale > 0:  # a kernel far noisier than any float sum order
            grad = (grad + np.float32(args.noise_scale) * np.asarray([noise.gauss(0.0, 1.0) for _ in range(d)], np.float32)).astype(np.float32)
        m = (b1 * m + (1 - b1) * grad).astype(np.float32)
        v = (b2 * v + (1 - b2) * grad * grad).astype(np.float32)
        mh, vh = m / (1 - b1**step), v / (1 - b2**step)
        if args.sgd:  # the update as large as the gradient, noise included
            w = (w - lr * grad).astype(np.float32)
        else:
            w = (w - lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        loss = float(np.mean(r.astype(np.float64) ** 2))
        if args.resume_from and nudged:
            loss *= 1 + args.loss_nudge
        trace.row(step, loss=loss, grad_norm=float(np.linalg.norm(grad.astype(np.float64))), lr=lr, consumed_samples=consumed)
        if step in args.save_at:
            write_ckpt(args.out, step, w, m, v, consumed)
    trace.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
