"""The state census (docs/census.md): what a process holds when its next
step starts, one FIELD<TAB>saved|local<TAB>VALUE[<TAB>NOTE] line per piece
of state, written to OUT/census/:

- iter_%07d.rank%d.txt: after the save at each K < N, and right after a
  load of K;
- iter_%07d.rank%d.first-step.txt (phase "first-step"): just before the
  first forward of step K+1, in the leg that saved K and in the leg that
  resumed from it, so that what runs between the load and the first step
  (a DataLoader iterator drawing its base seed from the global torch RNG
  when it is created) is seen too.

Values are compared as strings: integers in decimal, floats as %.17g
(exact), tensors and arrays as fp= + the first 16 hex digits of the SHA-256
of their little-endian bytes. state_fields() names the fields of the same
dict of registered objects checkpoint.save(state=...) saves."""

from __future__ import annotations

import hashlib
import io
import math
import os
import random
import sys

import numpy as np

from . import _atomic
from .checkpoint import (
    iter_dirname,
    modules_of,
    param_names,
    plan_state,
    rng_state,
    stateful_dict,
    tensor_to_array,
    to_path,
)
from .errors import EX_USAGE, CheckpointError

# The census files besides the one after a save or a load, by phase: the
# name's suffix is the contract with `resumecheck run`, which reads them.
PHASES = ("first-step",)


def fingerprint(value):
    """fp=<16 hex digits> of a tensor or array's dtype, shape and bytes."""
    if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):
        local = getattr(value, "to_local", None)
        if callable(local):  # a DTensor (FSDP2, tensor parallel): this rank's shard, as the rank holds it
            value = local()
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


def _bad(s):
    return not s or any(c in s for c in "\t\n\r\0")


def _clean(s, what):
    if _bad(s):
        raise ValueError(f"census {what} {s!r} is empty or holds a tab, newline or NUL")
    return s


def census_path(out, step, rank=0, phase=None):
    """OUT/census/iter_%07d.rank%d.txt, or .rank%d.<phase>.txt."""
    if phase is not None and phase not in PHASES:
        raise ValueError(f"census phase {phase!r} is not one of {', '.join(PHASES)}")
    suffix = "" if phase is None else "." + phase
    return os.path.join(out, "census", "%s.rank%d%s.txt" % (iter_dirname(step), rank, suffix))


def write(out, step, fields, rank=0, phase=None):
    """fields: {name: value} (class saved) or {name: (CLASS, value[, note])}.
    Writes census_path(out, step, rank, phase) atomically (phase None: the
    census after a save or a load; "first-step": the one just before the
    first forward of step step+1); returns its path."""
    path = census_path(out, step, rank, phase)
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
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _atomic.write_bytes(path, "".join(lines).encode("utf-8"))
    return path


def _rng_fields(f):
    st = rng_state()
    if "torch_cpu" in st:
        f["rng.torch_cpu"] = st["torch_cpu"]
    for i, t in enumerate(st.get("torch_cuda", [])):
        f[f"rng.torch_cuda.{i}"] = t
    n = st["numpy"]
    f["rng.numpy"] = np.concatenate([n["keys"].astype("<i8"), np.array([n["pos"], n["has_gauss"]], dtype="<i8")])
    f["rng.python"] = np.asarray(random.getstate()[1], dtype="<i8")


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
        _rng_fields(f)
    return f


# ---------------------------------------------------------------------------
# Registered objects (checkpoint.plan_state): every value of their
# state_dict() a field, named like its dataset


def _field_key(k):
    s = str(k)
    for c, esc in (("\t", "%09"), ("\n", "%0A"), ("\r", "%0D"), ("\0", "%00")):
        s = s.replace(c, esc)
    return s


def _put(f, name, value):
    if name in f:
        raise CheckpointError(EX_USAGE, f"census field {name!r} twice: two keys of the registered state read alike")
    f[name] = value


def _flatten(value, name, f):
    """value's fields under name: containers by key or index joined with
    '.', leaves as format_value writes them."""
    if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor) or isinstance(value, np.ndarray):
        _put(f, name, value)
    elif isinstance(value, dict):
        if not value:
            _put(f, name, "{}")
        for k, v in value.items():
            _flatten(v, f"{name}.{_field_key(k)}", f)
    elif isinstance(value, (list, tuple)):
        if not value:
            _put(f, name, "()" if isinstance(value, tuple) else "[]")
        for i, v in enumerate(value):
            _flatten(v, f"{name}.{i}", f)
    elif isinstance(value, io.BytesIO):
        _put(f, name, np.frombuffer(value.getvalue(), dtype=np.uint8))
    elif isinstance(value, (bytes, bytearray)):
        _put(f, name, np.frombuffer(bytes(value), dtype=np.uint8))
    elif isinstance(value, str):  # one a line cannot hold goes by fingerprint
        _put(f, name, np.frombuffer(value.encode("utf-8"), dtype=np.uint8) if _bad(value) else value)
    elif value is None or isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        _put(f, name, value)
    elif callable(value):
        return  # a function is not state (save() skips or refuses it)
    else:
        _put(f, name, f"<{type(value).__qualname__}>")


def _optimizer_fields(optimizer, names, prefix, f):
    sd = optimizer.state_dict()
    for idx in sorted(sd["state"]):
        for k in sorted(sd["state"][idx]):  # a loaded optimizer's order may differ
            _flatten(sd["state"][idx][k], f"{prefix}.{k}.{names[idx]}", f)
    for i, g in enumerate(sd["param_groups"]):
        _flatten({k: v for k, v in g.items() if k != "params"}, f"{prefix}.param_groups.{i}", f)


def state_fields(step, state, rng=True):
    """The fields of a dict of registered objects, named as save(state=...)
    names their datasets: iteration; model.<key> (the module registered as
    'model'); optimizer.<key>.<param> and optimizer.param_groups.<g>.<key>;
    state.<name>.<key> for every other object (its state_dict()'s keys,
    nested ones joined by '.'; a module's keys are its module paths);
    rng.<generator>."""
    entries = plan_state(state)
    modules = modules_of(entries)
    f = {"iteration": int(step)}
    # the generators first, as save() reads them before the /state objects:
    # a state_dict() may draw from them (torchdata's StatefulDataLoader,
    # loaded and not yet iterated, creates its iterator, which draws its base
    # seed from the global torch RNG)
    gen = {}
    if rng:
        _rng_fields(gen)
    for e in entries:
        if e.kind == "module":
            for k, v in e.obj.state_dict().items():
                _flatten(v, f"{e.field}.{k}", f)
        elif e.kind == "optimizer":
            _optimizer_fields(e.obj, param_names(modules, e.obj), e.field, f)
        elif e.kind == "tensor":
            _put(f, e.field, e.obj)
        else:
            _flatten(stateful_dict(e), e.field, f)
    f.update(gen)
    return f


def write_state(out, step, state, rank=0, phase=None, rng=True):
    """write() of state_fields(step, state): the census of the same dict
    checkpoint.save(state=...) is given."""
    return write(out, step, state_fields(step, state, rng), rank, phase)


__all__ = [
    "PHASES",
    "census_path",
    "fingerprint",
    "format_value",
    "state_fields",
    "to_path",
    "torch_fields",
    "write",
    "write_state",
]
