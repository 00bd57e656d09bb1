"""resumecheck-format checkpoints from a PyTorch trainer (docs/pytorch.md).

save() writes CKPT_ROOT/iter_%07d/ with one HDF5 shard per rank
(shard_%05d_of_%05d.h5), manifest.json (every shard's size and SHA-256, every
dataset's dtype, shape and SHA-256), args.json (run-specific facts, never
state) and COMPLETE, last. load() refuses a directory without COMPLETE and
a checkpoint written by another number of ranks (unless asked), checks the
shard against the manifest and restores what was saved into the live objects.

What is saved: the objects passed by keyword (model=, optimizer=,
scheduler=, scaler=, data_position=, extra=), the global RNGs, and `state`,
a dict of named objects registered once (torch.distributed.checkpoint's
Stateful protocol: anything with state_dict() and load_state_dict(); an
nn.Module, an optimizer, an LR scheduler, a GradScaler, a data loader, a
dict of counters updated in place on load, a tensor copied into).

Datasets are named by module path with '/' for '.', as the native shards
are (/model/decoder/layers/0/weight, /optimizer/exp_avg/decoder/layers/0/weight),
so `resumecheck compare` reports name the tensor a resume lost. Other
registered objects go under /state/<name>/.

Format version 2 records what a value was, so that dicts (any str or int
keys), lists and tuples come back exactly: container groups carry rc_kind
'dict'/'list'/'tuple', dict keys are escaped (escape_key). Version 1 shards
(no container kinds, '.' in keys as nesting) still load.

Equal state gives byte-identical files: object time tracking is off on the
file, every group and every dataset; the format bounds are pinned to
EARLIEST..V18; creation order is fixed; attributes are fixed-length strings
and little-endian scalars; every file is built whole. torch is imported only
when a torch object is passed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import socket
import sys
from typing import Any, NamedTuple

import h5py
import numpy as np

from . import _atomic
from .errors import EX_DATAERR, EX_IOERR, EX_NOINPUT, EX_USAGE, CheckpointError

FORMAT = "resumecheck-torch-shard"
FORMAT_VERSION = 2  # 2: container kinds and escaped dict keys; 1: neither
READ_VERSIONS = (1, 2)
MANIFEST_NAME = "manifest.json"
COMPLETE_NAME = "COMPLETE"
ARGS_NAME = "args.json"
MODEL_NAME, OPTIMIZER_NAME = "model", "optimizer"  # the registered names saved as /model, /optimizer


def iter_dirname(step):
    return "iter_%07d" % step


def shard_filename(rank, world_size):
    return "shard_%05d_of_%05d.h5" % (rank, world_size)


def fragment_filename(rank, world_size):
    return "shard_%05d_of_%05d.manifest.json" % (rank, world_size)


def to_path(name):
    """A module path ('decoder.layers.0.weight') as a dataset path below a
    group ('decoder/layers/0/weight'). Module names cannot contain '.', so
    the mapping is reversible."""
    if not name or "/" in name or name.startswith(".") or name.endswith(".") or ".." in name:
        raise CheckpointError(EX_USAGE, f"cannot name a dataset after {name!r}")
    return name.replace(".", "/")


def from_path(path):
    return path.replace("/", ".")


# ---------------------------------------------------------------------------
# Dict keys as HDF5 link names (format version 2). A link name cannot hold
# '/' or NUL, and '.' names the group itself; int keys (an optimizer's
# state) must come back as ints and str keys as strs.

_INT_NAME = re.compile(r"-?[0-9]+")
_ESCAPED = re.compile(r"%([0-9A-F]{2})")


def escape_key(key, where="a dict"):
    """A dict key as a link name: an int is its decimal; a str is itself with
    '%', '/' and NUL as %25, %2F, %00, and its first character escaped too
    where the name would read as an int ('7' -> '%37') or be only dots
    ('.' -> '%2E'); '' is '%'. key_of_name() reverses it."""
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (str, int, np.integer)):
        raise CheckpointError(
            EX_USAGE, f"{where}: cannot save a dict key of type {type(key).__name__} ({key!r}): keys must be str or int"
        )
    if not isinstance(key, str):
        return str(int(key))
    if key == "":
        return "%"
    s = key.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    if _INT_NAME.fullmatch(s) or not s.strip("."):
        s = "%%%02X" % ord(s[0]) + s[1:]
    return s


def key_of_name(name):
    """The dict key escape_key() wrote as name."""
    if name == "%":
        return ""
    if _INT_NAME.fullmatch(name):
        return int(name)
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), name)


# ---------------------------------------------------------------------------
# Values to arrays. Every saved thing becomes a numpy array in a little-endian
# dtype, with an 'rc_kind' attribute where the array alone does not say what
# to rebuild (a bfloat16 tensor kept as its uint16 bits, a Python scalar, a
# numpy array rather than a tensor, None); containers become groups with
# rc_kind dict, list or tuple.

_NONE = np.zeros(0, dtype=np.uint8)  # None: no bytes, rc_kind "none"
_ARRAY_KINDS = "biufc"  # numpy dtype kinds a dataset holds as they are
_CONTAINERS = ("dict", "list", "tuple")


def _torch():
    import torch  # noqa: PLC0415 (optional: imported only when a torch object is handled)

    return torch


def _is_tensor(v):
    return "torch" in sys.modules and isinstance(v, sys.modules["torch"].Tensor)


def _le(a):
    a = np.asarray(a)
    if not a.flags.c_contiguous:  # not np.ascontiguousarray: it makes 0-d arrays 1-d
        a = a.copy(order="C")
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a


def tensor_to_array(t):
    """A torch tensor as (array, kind): bfloat16 goes as its uint16 bits."""
    torch = _torch()
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return _le(t.view(torch.int16).numpy().view(np.uint16)), "bfloat16"
    return _le(t.numpy()), "tensor"


def array_to_tensor(a, kind):
    torch = _torch()
    a = np.array(a)  # a writable copy: torch.from_numpy keeps a view
    if kind == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _encode(value, path, out, skip_callables=False):
    """Append value's entries to out, parents first: (path, array, kind) for
    a dataset, (path, None, kind) for a container group. skip_callables: a
    function is left out (the scheduler= keyword's old behaviour: the
    loaded value is the live object's) rather than refused."""
    if _is_tensor(value):
        try:
            a, kind = tensor_to_array(value)
        except (TypeError, RuntimeError) as e:
            raise CheckpointError(EX_USAGE, f"{path}: cannot save a {value.dtype} tensor: {e}") from e
        out.append((path, a, kind))
    elif value is None:
        out.append((path, _NONE, "none"))
    elif isinstance(value, io.BytesIO):  # Transformer Engine's _extra_state
        out.append((path, np.frombuffer(value.getvalue(), dtype=np.uint8).copy(), "bytes_io"))
    elif isinstance(value, (bytes, bytearray)):
        out.append((path, np.frombuffer(bytes(value), dtype=np.uint8).copy(), "bytes"))
    elif isinstance(value, (bool, np.bool_)):
        out.append((path, np.array(int(value), dtype="<i8"), "bool"))
    elif isinstance(value, (int, np.integer)):
        if not -(2**63) <= int(value) < 2**63:
            raise CheckpointError(EX_USAGE, f"{path}: integer {value} does not fit in int64")
        out.append((path, np.array(int(value), dtype="<i8"), "int"))
    elif isinstance(value, (float, np.floating)):
        out.append((path, np.array(float(value), dtype="<f8"), "float"))
    elif isinstance(value, str):
        if "\0" in value:
            raise CheckpointError(EX_USAGE, f"{path}: cannot save a str holding NUL (a fixed-length string drops it)")
        out.append((path, np.array(value.encode("utf-8"), dtype=np.bytes_), "str"))
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS:
            raise CheckpointError(EX_USAGE, f"{path}: cannot save a numpy array of dtype {value.dtype}")
        out.append((path, _le(value), "ndarray"))
    elif isinstance(value, dict):
        out.append((path, None, "dict"))
        for k in value:  # insertion order: the caller's, kept in the file
            _encode(value[k], f"{path}/{escape_key(k, path)}", out, skip_callables)
    elif isinstance(value, (list, tuple)):
        out.append((path, None, "tuple" if isinstance(value, tuple) else "list"))
        for i, v in enumerate(value):
            _encode(v, f"{path}/{i}", out, skip_callables)
    elif callable(value) and skip_callables:
        return
    else:
        raise CheckpointError(EX_USAGE, f"{path}: cannot save a {type(value).__module__}.{type(value).__qualname__}")


def _kind_attr(obj):
    kind = obj.attrs.get("rc_kind")
    if kind is None:
        return None
    return kind.decode() if isinstance(kind, bytes) else str(kind)


def _decode_leaf(ds, version, want_tensor=False):
    """A dataset's value. Version 2: a dataset without rc_kind is a tensor.
    Version 1: it is a numpy array, or a tensor where the live object holds
    one (want_tensor)."""
    kind = _kind_attr(ds) or ("tensor" if version >= 2 else "array")
    a = ds[()]
    if kind in ("tensor", "bfloat16") or kind == "array" and want_tensor:
        return array_to_tensor(np.asarray(a), kind)
    if kind == "none":
        return None
    if kind == "bytes_io":
        return io.BytesIO(np.asarray(a).tobytes())
    if kind == "bytes":
        return np.asarray(a).tobytes()
    if kind == "bool":
        return bool(a)
    if kind == "int":
        return int(a)
    if kind == "float":
        return float(a)
    if kind == "str":
        return bytes(a).decode("utf-8")
    if kind not in ("ndarray", "array"):
        raise CheckpointError(EX_DATAERR, f"{ds.name}: unknown rc_kind {kind!r}")
    return np.array(a)


def _decode_like(template, node, version):
    """Rebuild a value shaped like template from the file's node: the live
    object gives the structure (dict keys, list lengths, tuples), the file
    the values. What the file lacks keeps the template's value."""
    if node is None:
        return template
    if isinstance(node, h5py.Dataset):
        return _decode_leaf(node, version, _is_tensor(template))
    if isinstance(template, dict):
        name = (lambda k: to_path(str(k))) if version == 1 else escape_key
        return {k: _decode_like(v, node.get(name(k)), version) for k, v in template.items()}
    if isinstance(template, (list, tuple)):
        vals = [_decode_like(v, node.get(str(i)), version) for i, v in enumerate(template)]
        return type(template)(vals) if isinstance(template, tuple) else vals
    return _decode_tree(node, version)


def _decode_tree(node, version):
    """The value the file holds at node, structure and all (the file says
    what each container was: version 2)."""
    if isinstance(node, h5py.Dataset):
        return _decode_leaf(node, version)
    names = list(node.keys())  # a dict group's: creation order, the saved dict's
    if version == 1:  # no kinds: digit-named members read as a list, '.' in keys was nesting
        if names and all(k.isdigit() for k in names):
            return [_decode_tree(node[str(i)], version) for i in range(len(names))]
        return {k: _decode_tree(node[k], version) for k in names}
    kind = _kind_attr(node) or "dict"
    if kind in ("list", "tuple"):
        if sorted(names) != sorted(str(i) for i in range(len(names))):
            raise CheckpointError(EX_DATAERR, f"{node.name}: a {kind} whose members are not 0..{len(names) - 1}")
        vals = [_decode_tree(node[str(i)], version) for i in range(len(names))]
        return tuple(vals) if kind == "tuple" else vals
    if kind != "dict":
        raise CheckpointError(EX_DATAERR, f"{node.name}: unknown rc_kind {kind!r}")
    return {key_of_name(k): _decode_tree(node[k], version) for k in names}


# ---------------------------------------------------------------------------
# The job's rank and world size


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError as e:
        raise CheckpointError(EX_USAGE, f"{name}={v!r} is not an integer") from e


def job_rank_world(rank=None, world_size=None):
    """(rank, world_size): the caller's, else torch.distributed's when it is
    initialised, else $RANK and $WORLD_SIZE (torchrun's), else 0 and 1."""
    if rank is None or world_size is None:
        r = w = None
        if "torch" in sys.modules:
            dist = sys.modules["torch"].distributed
            if dist.is_available() and dist.is_initialized():
                r, w = dist.get_rank(), dist.get_world_size()
        if w is None:
            r, w = _env_int("RANK"), _env_int("WORLD_SIZE")
        rank = (r if r is not None else 0) if rank is None else rank
        world_size = (w if w is not None else 1) if world_size is None else world_size
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise CheckpointError(EX_USAGE, f"bad rank {rank!r} of world size {world_size!r}")
    return rank, world_size


# ---------------------------------------------------------------------------
# Registered state: one dict of named objects for save, load and census


_STATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class Entry(NamedTuple):
    """One registered object: its name, the object, what kind of object it
    is (module, optimizer, tensor, dict, stateful), where its datasets go
    and the prefix of its census fields."""

    name: str
    obj: Any
    kind: str
    path: str
    field: str


def _kind_of(name, obj):
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(obj, torch.nn.Module):
            return "module"
        if isinstance(obj, torch.optim.Optimizer):
            return "optimizer"
        if isinstance(obj, torch.Tensor):
            return "tensor"
    if isinstance(obj, dict):
        return "dict"
    if callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)):
        return "stateful"
    raise CheckpointError(
        EX_USAGE,
        f"state[{name!r}] is a {type(obj).__name__}: register an object with state_dict() and load_state_dict() "
        "(a Stateful), an nn.Module, an optimizer, a tensor or a dict (a number cannot be restored in place: put it in a dict)",
    )


def plan_state(state=None, model=None, optimizer=None):
    """The registered objects (state, plus the model= and optimizer=
    keywords) as Entries, in save order: 'model' (an nn.Module) as /model,
    'optimizer' (a torch.optim.Optimizer) as /optimizer, every other one
    as /state/<name>."""
    entries = []
    if model is not None:
        entries.append(Entry(MODEL_NAME, model, "module", "/model", "model"))
    if optimizer is not None:
        entries.append(Entry(OPTIMIZER_NAME, optimizer, "optimizer", "/optimizer", "optimizer"))
    rest = []
    for name, obj in (state or {}).items():
        if not isinstance(name, str) or not _STATE_NAME.fullmatch(name):
            raise CheckpointError(EX_USAGE, f"state name {name!r}: use letters, digits, '_', '.', '-'")
        kind = _kind_of(name, obj)
        if (name, kind) in ((MODEL_NAME, "module"), (OPTIMIZER_NAME, "optimizer")):
            if any(e.name == name for e in entries):
                raise CheckpointError(EX_USAGE, f"{name} given twice: as {name}= and as state[{name!r}]")
            entries.append(Entry(name, obj, kind, "/" + name, name))
        else:
            rest.append(Entry(name, obj, kind, "/state/" + name, "state." + name))
    entries.sort(key=lambda e: e.path != "/model")  # /model, /optimizer, then /state in the caller's order
    return entries + rest


def modules_of(entries):
    """The registered modules, the model first: where optimizers' parameter names come from."""
    return [e.obj for e in entries if e.kind == "module"]


def param_names(model, optimizer):
    """The optimizer's parameter index (its state_dict's keys) -> the
    parameter's module path, from model.named_parameters() (model: a
    module, a list of modules searched in order, or None)."""
    by_id = {}
    for m in model if isinstance(model, (list, tuple)) else [model]:
        if m is not None:
            for name, p in m.named_parameters():
                by_id.setdefault(id(p), name)
    names, i = {}, 0
    for g in optimizer.param_groups:
        for p in g["params"]:
            names[i] = by_id.get(id(p), "param_%d" % i)
            i += 1
    return names


def stateful_dict(e):
    """What a registered dict or Stateful holds now (its state_dict())."""
    if e.kind == "dict":
        return e.obj
    try:
        return e.obj.state_dict()
    except Exception as ex:  # a user's object: say whose state_dict() failed
        raise CheckpointError(EX_USAGE, f"state[{e.name!r}].state_dict(): {type(ex).__name__}: {ex}") from ex


def _encode_module(module, base, out):
    for name, v in module.state_dict().items():
        _encode(v, f"{base}/{to_path(name)}", out)


def _encode_optimizer(optimizer, names, base, out):
    sd = optimizer.state_dict()
    groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
    _encode(groups, f"{base}/param_groups", out)
    # state keys sorted (exp_avg, exp_avg_sq, step): a loaded optimizer's
    # per-parameter dicts need not keep the order the live one had
    keys = sorted({k for s in sd["state"].values() for k in s})
    for k in keys:
        for idx in sorted(sd["state"]):
            if k in sd["state"][idx]:
                _encode(sd["state"][idx][k], f"{base}/{to_path(k)}/{to_path(names[idx])}", out)


# ---------------------------------------------------------------------------
# What goes in a shard


def rng_state():
    """Every global generator's state: torch CPU (and CUDA, when available),
    numpy's legacy global, Python's random."""
    st = {}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        st["torch_cpu"] = torch.get_rng_state()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            st["torch_cuda"] = list(torch.cuda.get_rng_state_all())
    name, keys, pos, has_gauss, cached = np.random.get_state()
    if name != "MT19937":
        raise CheckpointError(EX_USAGE, f"numpy's global generator is {name}, not MT19937")
    st["numpy"] = {
        "keys": np.asarray(keys, dtype="<u4"),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }
    version, internal, gauss_next = random.getstate()
    st["python"] = {
        "version": int(version),
        "state": np.asarray(internal, dtype="<i8"),
        "has_gauss_next": int(gauss_next is not None),
        "gauss_next": float(gauss_next or 0.0),
    }
    return st


def set_rng_state(st):
    if "torch_cpu" in st:
        torch = _torch()
        torch.set_rng_state(torch.as_tensor(np.asarray(st["torch_cpu"]), dtype=torch.uint8))
        if "torch_cuda" in st:
            torch.cuda.set_rng_state_all([torch.as_tensor(np.asarray(t), dtype=torch.uint8) for t in st["torch_cuda"]])
    if "numpy" in st:
        n = st["numpy"]
        np.random.set_state(
            ("MT19937", np.asarray(n["keys"], dtype=np.uint32), int(n["pos"]), int(n["has_gauss"]), float(n["cached_gaussian"]))
        )
    if "python" in st:
        p = st["python"]
        gauss = float(p["gauss_next"]) if int(p["has_gauss_next"]) else None
        random.setstate((int(p["version"]), tuple(int(x) for x in p["state"]), gauss))


def collect(model=None, optimizer=None, scheduler=None, scaler=None, rng=True, data_position=None, extra=None, state=None):
    """The shard's entries, in file order: [(path, array or None, kind)]
    (None: a container group)."""
    entries = plan_state(state, model, optimizer)
    modules = modules_of(entries)
    out = []
    for e in entries:
        if e.path in ("/model", "/optimizer"):
            _encode_entry(e, modules, out)
    if scheduler is not None:
        _encode(scheduler.state_dict(), "/scheduler", out, skip_callables=True)
    if scaler is not None:
        _encode(scaler.state_dict(), "/grad_scaler", out, skip_callables=True)
    if rng:
        _encode(rng_state(), "/rng", out)
    if data_position is not None:
        _encode(data_position, "/data", out)
    if extra is not None:
        _encode(extra, "/extra", out)
    for e in entries:
        if e.path.startswith("/state/"):
            _encode_entry(e, modules, out)
    seen = set()
    for p, _, _ in out:
        if p in seen:
            raise CheckpointError(EX_USAGE, f"two values would be saved as {p}")
        seen.add(p)
    return out


def _encode_entry(e, modules, out):
    if e.kind == "module":
        _encode_module(e.obj, e.path, out)
    elif e.kind == "optimizer":
        _encode_optimizer(e.obj, param_names(modules, e.obj), e.path, out)
    else:  # a tensor, a dict, a Stateful's state_dict(): the value as it is
        _encode(e.obj if e.kind == "tensor" else stateful_dict(e), e.path, out)


def _dtype_name(a):
    if a.dtype.kind == "S":
        return "string(%d)" % a.dtype.itemsize
    return a.dtype.name


def _fixed_str(s):
    return np.bytes_(s.encode("utf-8"))


def write_shard(path, datasets, meta):
    """Build the HDF5 shard at path (a temp name: the caller renames it)."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_V18)
    # test-only: RC_PY_TEST_TRACK_TIMES=1 turns time tracking back on (the
    # negative control of the byte-identity test)
    track = os.environ.get("RC_PY_TEST_TRACK_TIMES") == "1"
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(track)
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(track)
    # a dict's group keeps its members' creation order: the dict's key order
    ordered = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    ordered.set_obj_track_times(track)
    ordered.set_link_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
    fid = h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_EXCL, fcpl=fcpl, fapl=fapl)
    with h5py.File(fid) as f:
        made = {""}

        def group(p, plist=gcpl):  # p: "a/b/c" -> the group, made on demand, in order
            if p not in made:
                parent, _, name = p.rpartition("/")
                group(parent)
                h5py.h5g.create(f[parent or "/"].id, name.encode(), gcpl=plist)
                made.add(p)
            return f[p or "/"]

        g = group("meta")
        g.attrs["format"] = _fixed_str(FORMAT)
        for k in ("format_version", "rank", "world_size"):
            g.attrs[k] = np.int32(meta[k])
        g.attrs["iteration"] = np.int64(meta["iteration"])
        for p, a, kind in datasets:
            p = p.strip("/")
            if a is None:  # a container
                group(p, ordered if kind == "dict" else gcpl).attrs["rc_kind"] = _fixed_str(kind)
                continue
            parent, _, name = p.rpartition("/")
            ds = group(parent).create_dataset(name, data=a, track_times=track)
            if kind != "tensor":  # a tensor, the common case, carries no attribute
                ds.attrs["rc_kind"] = _fixed_str(kind)


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _entry_json(e):
    """One manifest shard entry's lines (the native layout: one dataset per line)."""
    ds = ",\n".join(
        "        " + json.dumps(d, sort_keys=True, separators=(",", ":")) for d in e["datasets"]
    )
    return (
        "    {\n"
        f'      "bytes": {e["bytes"]},\n'
        '      "datasets": [\n' + ds + ("\n" if ds else "") + "      ],\n"
        f'      "file": "{e["file"]}",\n'
        f'      "rank": {e["rank"]},\n'
        f'      "sha256": "{e["sha256"]}"\n'
        "    }"
    )


def manifest_text(iteration, world_size, entries):
    """Canonical manifest: keys sorted, 2-space indent, one dataset per line,
    no time stamps, newline at the end (docs/checkpoint-format.md)."""
    return (
        "{\n"
        '  "format": "resumecheck-checkpoint",\n'
        f'  "iteration": {iteration},\n'
        '  "producer": "resumecheck-python",\n'
        '  "shards": [\n' + ",\n".join(_entry_json(e) for e in entries) + "\n  ],\n"
        '  "version": 1,\n'
        f'  "world_size": {world_size}\n'
        "}\n"
    )


def _args_json(args, rank, world_size):
    facts = {
        "argv": list(sys.argv),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": rank,
        "world_size": world_size,
    }
    facts.update(args or {})
    return (json.dumps(facts, sort_keys=True, indent=2, default=str) + "\n").encode()


def save(
    ckpt_root,
    step,
    *,
    state=None,
    model=None,
    optimizer=None,
    scheduler=None,
    scaler=None,
    rng=True,
    data_position=None,
    extra=None,
    args=None,
    rank=None,
    world_size=None,
):
    """Write CKPT_ROOT/iter_%07d/ for step: what state (a dict of named
    objects, plan_state) and the keyword objects hold, and the RNGs. rank and
    world_size default to the job's (job_rank_world). With world_size 1 this
    writes the shard, manifest.json, args.json and COMPLETE (last). With
    world_size > 1 each rank writes its shard and a manifest fragment; after
    a barrier, rank 0 calls finalize(). Returns the iteration directory."""
    rank, world_size = job_rank_world(rank, world_size)
    if step < 0:
        raise CheckpointError(EX_USAGE, f"bad step {step}")
    d = os.path.join(ckpt_root, iter_dirname(step))
    if os.path.exists(os.path.join(d, COMPLETE_NAME)):
        raise CheckpointError(EX_IOERR, f"refusing to overwrite the complete checkpoint {d}")
    datasets = collect(model, optimizer, scheduler, scaler, rng, data_position, extra, state)
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise CheckpointError(EX_IOERR, f"{d}: {e.strerror or e}") from e
    name = shard_filename(rank, world_size)
    path = os.path.join(d, name)
    with _atomic.staged(path) as tmp:
        write_shard(tmp, datasets, {"format_version": FORMAT_VERSION, "rank": rank, "world_size": world_size, "iteration": step})
        entry = {
            "bytes": os.path.getsize(tmp),
            "datasets": [
                {"dtype": _dtype_name(a), "path": p, "sha256": hashlib.sha256(a.tobytes()).hexdigest(), "shape": list(a.shape)}
                for p, a, _ in datasets
                if a is not None
            ],
            "file": name,
            "rank": rank,
            "sha256": _sha256_file(tmp),
        }
        _atomic.commit(tmp, path)
    if rank == 0:
        _atomic.write_bytes(os.path.join(d, ARGS_NAME), _args_json(args, rank, world_size))
    if world_size == 1:
        _finish(d, step, world_size, [entry])
    else:
        frag = {"format": "resumecheck-manifest-fragment", "iteration": step, "shard": entry, "version": 1, "world_size": world_size}
        _atomic.write_bytes(os.path.join(d, fragment_filename(rank, world_size)), (json.dumps(frag, sort_keys=True) + "\n").encode())
    return d


def finalize(ckpt_root, step, world_size):
    """Rank 0, after every rank's save() returned (a barrier): check every
    fragment against its shard, write manifest.json and COMPLETE, remove
    the fragments."""
    d = os.path.join(ckpt_root, iter_dirname(step))
    entries = []
    for r in range(world_size):
        fp = os.path.join(d, fragment_filename(r, world_size))
        try:
            with open(fp, "rb") as f:
                frag = json.loads(f.read())
        except FileNotFoundError as e:
            raise CheckpointError(EX_NOINPUT, f"{fp}: rank {r} has not saved") from e
        except (OSError, ValueError) as e:
            raise CheckpointError(EX_DATAERR, f"{fp}: unreadable fragment: {e}") from e
        e = frag.get("shard", {})
        if frag.get("iteration") != step or frag.get("world_size") != world_size or e.get("rank") != r:
            raise CheckpointError(EX_DATAERR, f"{fp}: a fragment of another save")
        sp = os.path.join(d, shard_filename(r, world_size))
        if not os.path.isfile(sp) or os.path.getsize(sp) != e.get("bytes"):
            raise CheckpointError(EX_DATAERR, f"{sp}: missing, or not the size its fragment says")
        entries.append(e)
    _finish(d, step, world_size, entries)
    for r in range(world_size):
        os.unlink(os.path.join(d, fragment_filename(r, world_size)))
    _atomic.fsync_dir(d)
    return d


def _finish(d, step, world_size, entries):
    text = manifest_text(step, world_size, entries).encode()
    _atomic.write_bytes(os.path.join(d, MANIFEST_NAME), text)
    if os.environ.get("RC_PY_TEST_CRASH_BEFORE_COMPLETE") == "1":
        # test-only: a save that dies between the manifest and the marker
        os._exit(3)
    marker = f"{hashlib.sha256(text).hexdigest()}  {MANIFEST_NAME}\n".encode()
    _atomic.write_bytes(os.path.join(d, COMPLETE_NAME), marker)


# ---------------------------------------------------------------------------
# ---------------------------------------------------------------------------
# Loading


def open_checkpoint(d, rank=0, world_size=None, allow_world_size_change=False):
    """Verify d (COMPLETE, the manifest it names, this rank's shard) and open
    the shard. world_size: the job's; a checkpoint written by another number
    of ranks is refused unless allow_world_size_change (None: not checked).
    Returns (h5py.File, manifest dict, shard format version)."""
    if not os.path.isdir(d):
        raise CheckpointError(EX_NOINPUT, f"{d}: no such checkpoint directory")
    cp = os.path.join(d, COMPLETE_NAME)
    if not os.path.isfile(cp):
        raise CheckpointError(EX_DATAERR, f"{d}: has no {COMPLETE_NAME}: an unfinished save, not loaded")
    try:
        with open(os.path.join(d, MANIFEST_NAME), "rb") as f:
            text = f.read()
        with open(cp, "rb") as f:
            marker = f.read()
    except OSError as e:
        raise CheckpointError(EX_DATAERR, f"{d}: {e.strerror or e}") from e
    if marker != f"{hashlib.sha256(text).hexdigest()}  {MANIFEST_NAME}\n".encode():
        raise CheckpointError(EX_DATAERR, f"{cp}: does not name the SHA-256 of {MANIFEST_NAME}")
    try:
        man = json.loads(text)
        written_by = man["world_size"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(EX_DATAERR, f"{d}/{MANIFEST_NAME}: malformed") from e
    if world_size is not None and written_by != world_size:
        if not allow_world_size_change:
            raise CheckpointError(
                EX_DATAERR,
                f"{d}: checkpoint written by {written_by} rank{'s' if written_by != 1 else ''}, this job has {world_size}: "
                "each rank's shard holds that rank's state (its RNGs, a sharded optimizer's slice) and nothing "
                f"reshards it; pass allow_world_size_change=True to load rank {rank}'s shard anyway",
            )
        if rank >= written_by:
            raise CheckpointError(EX_DATAERR, f"{d}: checkpoint written by {written_by} ranks has no shard for rank {rank}")
    try:
        entry = next(s for s in man["shards"] if s["rank"] == rank)
    except (KeyError, TypeError, StopIteration) as e:
        raise CheckpointError(EX_DATAERR, f"{d}/{MANIFEST_NAME}: malformed, or no shard for rank {rank}") from e
    if entry["file"] != shard_filename(rank, written_by):
        raise CheckpointError(EX_DATAERR, f"{d}/{MANIFEST_NAME}: rank {rank}'s file is {entry['file']!r}")
    sp = os.path.join(d, entry["file"])
    if not os.path.isfile(sp):
        raise CheckpointError(EX_DATAERR, f"{sp}: missing or not a regular file")
    got = _sha256_file(sp)
    if os.path.getsize(sp) != entry["bytes"] or got != entry["sha256"]:
        raise CheckpointError(EX_DATAERR, f"{sp}: its bytes do not match its manifest (SHA-256 {got}, manifest says {entry['sha256']})")
    f = h5py.File(sp, "r")
    m = f.get("meta")
    fmt = m.attrs.get("format") if m is not None else None
    version = int(m.attrs["format_version"]) if fmt == FORMAT.encode() and "format_version" in m.attrs else None
    if version not in READ_VERSIONS:
        f.close()
        raise CheckpointError(EX_DATAERR, f"{sp}: not a {FORMAT} shard of version {' or '.join(map(str, READ_VERSIONS))}")
    return f, man, version


def _restore(what, fn, value):
    """fn(value) (a load_state_dict), its failure as a CheckpointError naming what."""
    try:
        fn(value)
    except CheckpointError:
        raise
    except Exception as e:  # the object's own check (a shape, a missing key): bad data for it
        raise CheckpointError(EX_DATAERR, f"{what}.load_state_dict(): {type(e).__name__}: {e}") from e


def _load_module(module, g, where, what, strict, version):
    sd = module.state_dict()
    missing = [k for k in sd if g is None or to_path(k) not in g]
    if strict and missing and any(_is_tensor(sd[k]) for k in missing):
        raise CheckpointError(EX_DATAERR, f"{where}/{to_path(missing[0])}: not in the shard ({what} was not saved)")
    _restore(what, module.load_state_dict, {k: _decode_like(v, g.get(to_path(k)) if g else None, version) for k, v in sd.items()})


def _load_optimizer(optimizer, names, g, where, what, version):
    sd = optimizer.state_dict()
    index = {to_path(n): i for i, n in names.items()}
    groups = [{k: v for k, v in pg.items() if k != "params"} for pg in sd["param_groups"]]
    groups = _decode_like(groups, g.get("param_groups"), version)
    for pg, new in zip(sd["param_groups"], groups):
        pg.update(new)
    state = {}
    for key in g:
        if key == "param_groups":
            continue

        def visit(p, node, key=key):
            if isinstance(node, h5py.Dataset):
                if p not in index:
                    raise CheckpointError(EX_DATAERR, f"{where}/{key}/{p} names no parameter of {what}")
                state.setdefault(index[p], {})[from_path(key)] = _decode_leaf(node, version, True)

        g[key].visititems(visit)
    sd["state"] = {i: state[i] for i in sorted(state)}
    _restore(what, optimizer.load_state_dict, sd)


def _load_entry(e, f, modules, ckpt_dir, strict, version):
    node = f.get(e.path)
    what = e.name if e.path in ("/model", "/optimizer") else f"state[{e.name!r}]"
    if node is None:
        if strict:
            raise CheckpointError(EX_DATAERR, f"{ckpt_dir}: no {e.path} in the shard ({what} was not saved)")
        return  # not strict: the live object keeps its state
    where = f"{ckpt_dir}: {e.path}"
    if e.kind == "module":
        _load_module(e.obj, node, where, what, strict, version)
    elif e.kind == "optimizer":
        _load_optimizer(e.obj, param_names(modules, e.obj), node, where, what, version)
    elif e.kind == "tensor":
        v = _decode_tree(node, version)
        if not _is_tensor(v) or v.shape != e.obj.shape:
            raise CheckpointError(EX_DATAERR, f"{where}: not a tensor of shape {tuple(e.obj.shape)} for {what}")
        with _torch().no_grad():
            e.obj.copy_(v)
    else:
        v = _decode_tree(node, version)
        if not isinstance(v, dict):
            raise CheckpointError(EX_DATAERR, f"{where}: {what} was saved as a {type(v).__name__}, not a dict")
        _restore(what, e.obj.update if e.kind == "dict" else e.obj.load_state_dict, v)


def load(
    ckpt_dir,
    *,
    state=None,
    model=None,
    optimizer=None,
    scheduler=None,
    scaler=None,
    rng=True,
    rank=None,
    world_size=None,
    allow_world_size_change=False,
    strict=True,
):
    """Restore what save() wrote into the live objects given: state (the
    dict of named objects save() had; a dict is updated in place, a
    Stateful gets load_state_dict() of what it saved) and the keyword
    objects. rank and world_size default to the job's (job_rank_world): a
    checkpoint written by another number of ranks is refused (65) unless
    allow_world_size_change, which loads this rank's shard as it is.
    strict: every registered object, model tensor and the optimizer must be
    in the file. Returns a dict with 'iteration', 'world_size' (the
    checkpoint's), 'data_position' and 'extra' (None when not saved)."""
    rank, world_size = job_rank_world(rank, world_size)
    entries = plan_state(state, model, optimizer)
    modules = modules_of(entries)
    f, man, version = open_checkpoint(ckpt_dir, rank, world_size, allow_world_size_change)
    with f:
        it = int(f["meta"].attrs["iteration"])
        for e in entries:
            _load_entry(e, f, modules, ckpt_dir, strict, version)
        if scheduler is not None and "scheduler" in f:
            _restore("scheduler", scheduler.load_state_dict, _decode_like(scheduler.state_dict(), f["scheduler"], version))
        if scaler is not None and "grad_scaler" in f:
            _restore("scaler", scaler.load_state_dict, _decode_like(scaler.state_dict(), f["grad_scaler"], version))
        if rng and "rng" in f:
            set_rng_state(_decode_tree(f["rng"], version))
        data = _decode_tree(f["data"], version) if "data" in f else None
        extra = _decode_tree(f["extra"], version) if "extra" in f else None
    return {"iteration": it, "world_size": man["world_size"], "data_position": data, "extra": extra}


def latest(ckpt_root):
    """The newest iteration directory under ckpt_root that has COMPLETE, or None."""
    best = None
    try:
        names = os.listdir(ckpt_root)
    except FileNotFoundError:
        return None
    for n in names:
        if n.startswith("iter_") and n[5:].isdigit() and os.path.isfile(os.path.join(ckpt_root, n, COMPLETE_NAME)):
            if best is None or int(n[5:]) > int(best[5:]):
                best = n
    return os.path.join(ckpt_root, best) if best else None
