"""`python3 -m resumecheck COMMAND`: the package's command line.

    compare-torch A B [--ignore PATTERN]... [--json FILE] [--max-lines N] [--deep]
                      [--unsafe-pickle] [--resumecheck PATH]
    convert SRC OUT [--unsafe-pickle]

A and B are torch.save files (.pt/.pth) or torch.distributed.checkpoint
directories, compared as `resumecheck compare` compares safetensors files
(python/resumecheck/torchfmt.py, docs/compare.md "PyTorch formats"). Exit
codes are compare's: 0 identical, 1 different, 64 usage, 65 unreadable or
corrupt input, 66 missing input or nothing compared, 70 internal, 74 I/O.
"""

import argparse
import os
import sys

from ._cli import bundled_binary
from .errors import EX_USAGE, CheckpointError


def _bundled():
    exe = bundled_binary()
    return str(exe) if exe else None


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2; the project's usage code is 64
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(EX_USAGE)


def _parser():
    p = _Parser(prog="python3 -m resumecheck", description="resumecheck's Python commands (docs/compare.md, docs/pytorch.md)")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    c = sub.add_parser(
        "compare-torch",
        help="compare two torch.save files or DCP directories tensor by tensor",
        description="Compare two PyTorch checkpoints (torch.save files or torch.distributed.checkpoint "
        "directories): tensors by their bytes through `resumecheck compare` on safetensors conversions, "
        "other values (ints, floats by their 64 bits, strings, ...) by name. "
        "exit: 0 identical, 1 different, 64 usage, 65 unreadable/corrupt, 66 missing or nothing compared.",
    )
    c.add_argument("a", metavar="A")
    c.add_argument("b", metavar="B")
    c.add_argument("--ignore", action="append", default=[], metavar="PATTERN", help="skip names matching the fnmatch pattern (NAME or :NAME); repeatable")
    c.add_argument("--json", metavar="FILE", help="write every difference as JSON (schema resumecheck-compare v1, plus tensors_compared, values_compared)")
    c.add_argument("--max-lines", type=int, default=40, metavar="N", help="list at most N differences (default 40; -1: all)")
    c.add_argument("--deep", action="store_true", help="passed to resumecheck compare")
    c.add_argument("--unsafe-pickle", action="store_true", help="load with weights_only=False (runs the pickle's code: trusted files only)")
    c.add_argument("--resumecheck", metavar="PATH", help="the resumecheck binary (default $RC_BIN, else the one installed with this package, else PATH)")
    v = sub.add_parser(
        "convert",
        help="write a torch checkpoint as OUT/tensors.safetensors and OUT/values.json",
        description="Convert a torch.save file or DCP directory to OUT/tensors.safetensors (every tensor, its bytes) "
        "and OUT/values.json (every other value), the forms compare-torch compares.",
    )
    v.add_argument("src", metavar="SRC")
    v.add_argument("out", metavar="OUT")
    v.add_argument("--unsafe-pickle", action="store_true", help="load with weights_only=False (trusted files only)")
    return p


def main(argv=None):
    p = _parser()
    args = p.parse_args(argv)
    if args.cmd is None:
        p.print_help(sys.stderr)
        return EX_USAGE
    from . import torchfmt  # noqa: PLC0415 (imports torch)

    if args.cmd == "compare-torch":
        if args.max_lines < -1:
            p.error("--max-lines: -1 or more")
        if args.json == "":
            p.error("--json needs a file name")
        return torchfmt.compare(
            args.a,
            args.b,
            ignore=args.ignore,
            max_lines=args.max_lines,
            json_out=args.json,
            unsafe=args.unsafe_pickle,
            # the program installed with this package (a wheel) before PATH's
            binary=args.resumecheck or (None if os.environ.get("RC_BIN") else _bundled()),
            deep=args.deep,
        )
    try:
        if args.unsafe_pickle:
            print("resumecheck convert: warning: --unsafe-pickle: weights_only=False runs the pickle's code", file=sys.stderr)
        kind, flat = torchfmt.convert(args.src, args.out, args.unsafe_pickle)
    except CheckpointError as e:
        print(f"resumecheck convert: {e}", file=sys.stderr)
        return e.exit_code
    print(f"{args.src} ({kind}): {len(flat.tensors)} tensors -> {args.out}/tensors.safetensors, {len(flat.values)} other values -> {args.out}/values.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
