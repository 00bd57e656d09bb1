"""resumecheck: write resumecheck-format checkpoints, traces and state
censuses from a Python (PyTorch) trainer driven by `resumecheck run
--trainer exec` (docs/pytorch.md, docs/exec-trainer.md).

    args = resumecheck.exec_args()       # --steps --stop-at --save-at --resume-from --out --leg
    rc = resumecheck.register(args, {"model": m, "optimizer": o, "ema": ema, "sampler": s})
    start = rc.resume()                  # then rc.before_step(step), rc.after_step(step)

or by hand: resumecheck.checkpoint.save(resumecheck.ckpt_root(args.out), step, state={...}).

`python3 -m resumecheck compare-torch A B` compares torch.save files and
torch.distributed.checkpoint directories (resumecheck.torchfmt, docs/compare.md).
"""

import argparse
import os

from . import census, checkpoint, trace  # noqa: F401
from .errors import CheckpointError  # noqa: F401
from .registry import Registry, register  # noqa: F401

__version__ = "0.1.0"

# The --train-cmd flags exec_args() parses, for building a template: each
# optional value is one word, so an empty placeholder drops it whole.
TRAIN_CMD_FLAGS = (
    "--steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} "
    "--out {out} --leg {leg}"
)


def _save_list(s):
    if s is None or s == "":
        return []
    try:
        steps = [int(x) for x in s.split(",")]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--save-at {s!r}: not a comma-separated list of steps") from e
    if any(k < 1 for k in steps) or steps != sorted(set(steps)):
        raise argparse.ArgumentTypeError(f"--save-at {s!r}: steps must be positive and ascending")
    return steps


def add_exec_args(parser):
    """Add the exec placeholders' flags to an argparse parser. Each defaults
    to its RC_* environment variable (RC_STEPS, ...), which `run` sets too."""
    env = os.environ.get
    parser.add_argument("--steps", type=int, default=env("RC_STEPS"), help="{steps}: the horizon N")
    parser.add_argument("--stop-at", type=int, default=env("RC_STOP_AT"), help="{stop_at}: the last step to train")
    parser.add_argument("--save-at", type=_save_list, default=env("RC_SAVE_AT", ""), help="{save_at}: steps to save at")
    parser.add_argument("--resume-from", default=env("RC_RESUME_FROM") or None, help="{resume_from}: checkpoint to load")
    parser.add_argument("--out", default=env("RC_OUT"), help="{out}: this leg's directory")
    parser.add_argument("--leg", default=env("RC_LEG", ""), help="{leg}: the leg's name")
    parser.add_argument("--fusion", default=env("RC_FUSION", ""), help="{fusion}: on/off under --confirm-arm")
    return parser


def exec_args(argv=None, parser=None):
    """Parse the exec placeholders' flags (and the caller's, when parser is
    given). --steps and --out are required; --stop-at defaults to --steps."""
    p = add_exec_args(parser or argparse.ArgumentParser())
    a = p.parse_args(argv)
    if a.steps is None or a.out is None:
        p.error("--steps and --out are required")
    a.steps = int(a.steps)
    a.stop_at = a.steps if a.stop_at is None else int(a.stop_at)
    if isinstance(a.save_at, str):
        a.save_at = _save_list(a.save_at)
    if not 1 <= a.stop_at <= a.steps:
        p.error(f"--stop-at {a.stop_at} is not in 1..{a.steps}")
    return a


def ckpt_root(out):
    """OUT/ckpt: where a leg's checkpoints go (iter_%07d below it)."""
    return os.path.join(out, "ckpt")
