"""The state census (docs/census.md): what a process holds when its next
step starts, one FIELD<TAB>saved|local<TAB>VALUE[<TAB>NOTE] line per piece
of state, written to OUT/census/iter_%07d.rank%d.txt after the save at each
K < N and right after a load. Values are compared as strings: integers in
decimal, floats as %.17g (exact), tensors and arrays as fp= + the first 16
hex digits of the SHA-256 of their little-endian bytes."""

import hashlib
import math
import os
import random
import sys

import numpy as np

from . import _atomic
from .checkpoint import iter_dirname, param_names, rng_state, tensor_to_array, to_path


def fingerprint(value):
    """fp=<16 hex digits> of a tensor or array's dtype, shape and bytes."""
    if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):
        a, kind = tensor_to_array(value)
    else:
        a, kind = np.asarray(value), "ndarray"
        a = a if a.flags.c_contiguous else a.copy(order="C")
    h = hashlib.sha256(f"{kind}:{a.dtype.str}:{a.shape}:".encode())
    h.update(a.tobytes())
    return "fp=" + h.hexdigest()[:16]


def format_value(v):
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return repr(v) if math.isnan(v) or math.isinf(v) else "%.17g" % v
    if isinstance(v, str):
        return v
    if v is None:
        return "none"
    return fingerprint(v)


def _clean(s, what):
    if not s or any(c in s for c in "\t\n\r\0"):
        raise ValueError(f"census {what} {s!r} is empty or holds a tab, newline or NUL")
    return s


def write(out, step, fields, rank=0):
    """fields: {name: value} (class saved) or {name: (CLASS, value[, note])}.
    Writes OUT/census/iter_%07d.rank%d.txt atomically; returns its path."""
    lines = ["# resumecheck python census\n"]
    for name, spec in fields.items():
        cls, value, note = "saved", spec, None
        if isinstance(spec, tuple):
            cls, value = spec[0], spec[1]
            note = spec[2] if len(spec) > 2 else None
        if cls not in ("saved", "local"):
            raise ValueError(f"census field {name}: class {cls!r} is not saved or local")
        cells = [_clean(name, "field"), cls, _clean(format_value(value), "value")]
        if note:
            cells.append(_clean(note, "note"))
        lines.append("\t".join(cells) + "\n")
    d = os.path.join(out, "census")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "%s.rank%d.txt" % (iter_dirname(step), rank))
    _atomic.write_bytes(path, "".join(lines).encode("utf-8"))
    return path


def torch_fields(step, model=None, optimizer=None, scheduler=None, scaler=None, data_position=None, rng=True):
    """The fields a PyTorch trainer's checkpoint carries, named as the built-in
    trainer names them (iteration, optimizer.step, optimizer.exp_avg.<param>,
    model.<param>, data.<key>, rng.<generator>)."""
    f = {"iteration": int(step)}
    if data_position is not None:
        items = data_position.items() if isinstance(data_position, dict) else [("position", data_position)]
        for k, v in items:
            f[f"data.{k}"] = v
    if optimizer is not None:
        sd = optimizer.state_dict()
        names = param_names(model, optimizer)
        for idx in sorted(sd["state"]):
            for k in sorted(sd["state"][idx]):  # a loaded optimizer's order may differ
                f[f"optimizer.{k}.{names[idx]}"] = sd["state"][idx][k]
        for i, g in enumerate(sd["param_groups"]):
            f[f"optimizer.param_groups.{i}.lr"] = float(g["lr"])
    if scheduler is not None:
        for k, v in scheduler.state_dict().items():
            if isinstance(v, (int, float, bool)):
                f[f"scheduler.{k}"] = v
    if scaler is not None:
        for k, v in scaler.state_dict().items():
            f[f"grad_scaler.{k}"] = v
    if model is not None:
        for k, v in model.state_dict().items():
            if v is not None and not callable(v):
                f[f"model.{k}"] = v
    if rng:
        st = rng_state()
        if "torch_cpu" in st:
            f["rng.torch_cpu"] = st["torch_cpu"]
        for i, t in enumerate(st.get("torch_cuda", [])):
            f[f"rng.torch_cuda.{i}"] = t
        n = st["numpy"]
        f["rng.numpy"] = np.concatenate([n["keys"].astype("<i8"), np.array([n["pos"], n["has_gauss"]], dtype="<i8")])
        f["rng.python"] = np.asarray(random.getstate()[1], dtype="<i8")
    return f


__all__ = ["write", "fingerprint", "format_value", "torch_fields", "to_path"]
