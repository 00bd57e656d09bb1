"""The `resumecheck` console command of the wheel (python/pyproject.toml).

It runs the C program the wheel carries (resumecheck/_bin/resumecheck, CPU
backend, its libraries vendored in resumecheck.libs/) in this process's
place. RC_PYTHON is set to this interpreter unless already set: the program
reads PyTorch checkpoints by running `RC_PYTHON -m resumecheck compare-torch`
(harness/compare_torch.c), and this interpreter is the one that has this
package and its dependencies, activated or not.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional, Sequence

EX_NOINPUT = 66  # the project's exit codes: missing input
EX_SOFTWARE = 70  # internal error


def _binary_path() -> Path:
    return Path(__file__).resolve().parent / "_bin" / "resumecheck"


def bundled_binary() -> Optional[Path]:
    """The program installed with this package, or None (the package in the
    source tree carries none: the program is in the cmake build)."""
    exe = _binary_path()
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    exe = bundled_binary()
    if exe is None:
        print(
            f"resumecheck: this installation of the Python package has no program ({_binary_path()} is missing): "
            'install the wheel (README, "Start: my PyTorch trainer") or build the program with cmake',
            file=sys.stderr,
        )
        return EX_NOINPUT
    if not os.environ.get("RC_PYTHON") and sys.executable:
        os.environ["RC_PYTHON"] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(exe, ["resumecheck", *args])  # replaces this process: signals and exit codes are the program's
    except OSError as e:
        print(f"resumecheck: cannot run {exe}: {e.strerror}", file=sys.stderr)
        return EX_SOFTWARE
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
