"""trace.csv for an exec trainer (docs/trace.md, docs/exec-trainer.md): a
header, then one row per step in step order. Every float column is written
twice, a decimal copy (%.9g) for people and the exact value as float.hex()
in NAME_hex, which is what `resumecheck run` compares. Each row is flushed
as it is written, so a leg that dies leaves the steps it finished."""

import math
import os


class TraceWriter:
    """TraceWriter(out, floats=("loss", "grad_norm", "lr"), ints=("consumed_samples",))
    writes OUT/trace.csv with columns step, loss, loss_hex, ..., consumed_samples."""

    def __init__(self, out, floats=("loss", "grad_norm", "lr"), ints=()):
        self.floats, self.ints = tuple(floats), tuple(ints)
        names = list(self.floats) + list(self.ints)
        if "step" in names or len(set(names)) != len(names) or any(not n or "," in n or "\n" in n for n in names):
            raise ValueError(f"bad trace columns {names!r}")
        cols = ["step"]
        for n in self.floats:
            cols += [n, n + "_hex"]
        cols += list(self.ints)
        self.header = ",".join(cols)
        os.makedirs(out, exist_ok=True)
        self.path = os.path.join(out, "trace.csv")
        self._f = open(self.path, "w", encoding="ascii", newline="\n")
        self._f.write(self.header + "\n")
        self._f.flush()
        self._last = None

    @staticmethod
    def exact(x):
        """The exact copy of a float: float.hex(), 'nan'/'inf'/'-inf' as such."""
        x = float(x)
        if math.isnan(x) or math.isinf(x):
            return repr(x)
        return x.hex()

    def row(self, step, **values):
        step = int(step)
        if self._last is not None and step <= self._last:
            raise ValueError(f"trace steps must ascend: {step} after {self._last}")
        if set(values) != set(self.floats) | set(self.ints):
            raise ValueError(f"trace row for step {step} has columns {sorted(values)}, want {sorted(self.floats + self.ints)}")
        cells = [str(step)]
        for n in self.floats:
            x = float(values[n])
            cells += ["%.9g" % x, self.exact(x)]
        cells += [str(int(values[n])) for n in self.ints]
        self._f.write(",".join(cells) + "\n")
        self._f.flush()
        self._last = step

    def close(self):
        if self._f:
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
