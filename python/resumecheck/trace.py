"""trace.csv for an exec trainer (docs/trace.md, docs/exec-trainer.md): a
header, then one row per step in step order. Every float column is written
twice, a decimal copy (%.9g) for people and the exact value as float.hex()
in NAME_hex, which is what `resumecheck run` compares. Each row is flushed
as it is written, so a leg that dies leaves the steps it finished.

For `run --noise calibrated` (a trainer that is not bitwise deterministic,
docs/exec-trainer.md), exact= and noisy= declare which columns must agree
whatever the kernels do (a learning rate, a batch fingerprint, a counter)
and which run-to-run noise may change (a loss, a grad norm): they are
written to OUT/trace_columns.json beside the trace. Undeclared columns get
run's defaults: lr and loss_scale exact, integer columns exact, floats
noisy."""

import json
import math
import os

from . import _atomic

COLUMNS_NAME = "trace_columns.json"
COLUMNS_SCHEMA = "resumecheck.trace-columns"


class TraceWriter:
    """TraceWriter(out, floats=("loss", "grad_norm", "lr"), ints=("consumed_samples",),
    exact=("lr", "consumed_samples"), noisy=("loss", "grad_norm"))
    writes OUT/trace.csv with columns step, loss, loss_hex, ..., consumed_samples,
    and, when exact or noisy name columns, OUT/trace_columns.json."""

    def __init__(self, out, floats=("loss", "grad_norm", "lr"), ints=(), exact=(), noisy=()):
        self.floats, self.ints = tuple(floats), tuple(ints)
        names = list(self.floats) + list(self.ints)
        if "step" in names or len(set(names)) != len(names) or any(not n or "," in n or "\n" in n for n in names):
            raise ValueError(f"bad trace columns {names!r}")
        exact, noisy = tuple(exact), tuple(noisy)
        unknown = [n for n in exact + noisy if n not in names]
        if unknown:
            raise ValueError(f"declared trace columns {unknown!r} are not columns {names!r}")
        if set(exact) & set(noisy):
            raise ValueError(f"trace columns {sorted(set(exact) & set(noisy))!r} declared both exact and noisy")
        cols = ["step"]
        for n in self.floats:
            cols += [n, n + "_hex"]
        cols += list(self.ints)
        self.header = ",".join(cols)
        os.makedirs(out, exist_ok=True)
        if exact or noisy:
            doc = {"schema": COLUMNS_SCHEMA, "schema_version": 1, "exact": list(exact), "noisy": list(noisy)}
            _atomic.write_bytes(os.path.join(out, COLUMNS_NAME), (json.dumps(doc, indent=1) + "\n").encode())
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
