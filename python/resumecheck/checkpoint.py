"""resumecheck-format checkpoints from a PyTorch trainer (docs/pytorch.md).

save() writes CKPT_ROOT/iter_%07d/ with one HDF5 shard per rank
(shard_%05d_of_%05d.h5), manifest.json (every shard's size and SHA-256, every
dataset's dtype, shape and SHA-256), args.json (run-specific facts, never
state) and COMPLETE, last. load() refuses a directory without COMPLETE,
checks the shard against the manifest and restores the model, optimizer,
scheduler, grad scaler, RNG states, data position and extra state.

Datasets are named by module path with '/' for '.', as the native shards
are (/model/decoder/layers/0/weight, /optimizer/exp_avg/decoder/layers/0/weight),
so `resumecheck compare` reports name the tensor a resume lost.

Equal state gives byte-identical files: object time tracking is off on the
file, every group and every dataset; the format bounds are pinned to
EARLIEST..V18; creation order is fixed; attributes are fixed-length strings
and little-endian scalars; every file is built whole. torch is imported only
when a torch object is passed.
"""

import hashlib
import io
import json
import os
import random
import socket
import sys

import h5py
import numpy as np

from . import _atomic
from .errors import EX_DATAERR, EX_IOERR, EX_NOINPUT, EX_USAGE, CheckpointError

FORMAT = "resumecheck-torch-shard"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
COMPLETE_NAME = "COMPLETE"
ARGS_NAME = "args.json"


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
# Values to arrays. Every saved thing becomes a numpy array in a little-endian
# dtype, with an optional 'rc_kind' attribute where the array alone does not
# say what to rebuild (a bfloat16 tensor kept as its uint16 bits, a Python
# scalar, a BytesIO).


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


def _encode(value, path, out):
    """Append (path, array, kind) for value to out; None and callables
    (LambdaLR's functions) are not state a file can hold and are skipped;
    their loaded value is the live object's."""
    if value is None or callable(value) and not _is_tensor(value):
        return
    if _is_tensor(value):
        a, kind = tensor_to_array(value)
        out.append((path, a, kind))
    elif isinstance(value, io.BytesIO):  # Transformer Engine's _extra_state
        out.append((path, np.frombuffer(value.getvalue(), dtype=np.uint8).copy(), "bytes_io"))
    elif isinstance(value, (bool, np.bool_)):
        out.append((path, np.array(int(value), dtype="<i8"), "bool"))
    elif isinstance(value, (int, np.integer)):
        if not -(2**63) <= int(value) < 2**63:
            raise CheckpointError(EX_USAGE, f"{path}: integer {value} does not fit in int64")
        out.append((path, np.array(int(value), dtype="<i8"), "int"))
    elif isinstance(value, (float, np.floating)):
        out.append((path, np.array(float(value), dtype="<f8"), "float"))
    elif isinstance(value, str):
        out.append((path, np.array(value.encode("utf-8"), dtype=np.bytes_), "str"))
    elif isinstance(value, np.ndarray):
        out.append((path, _le(value), "ndarray"))
    elif isinstance(value, dict):
        for k in value:  # insertion order: the caller's, deterministic
            _encode(value[k], f"{path}/{to_path(str(k))}", out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _encode(v, f"{path}/{i}", out)
    else:
        raise CheckpointError(EX_USAGE, f"{path}: cannot save a {type(value).__name__}")


def _decode_leaf(ds, want_tensor=False):
    """A dataset's value. A plain array (no rc_kind) comes back as a torch
    tensor where the live object holds one (want_tensor), else as numpy."""
    kind = ds.attrs.get("rc_kind", b"array")
    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    a = ds[()]
    if kind == "bfloat16" or kind == "array" and want_tensor:
        return array_to_tensor(np.asarray(a), kind)
    if kind == "bytes_io":
        return io.BytesIO(np.asarray(a).tobytes())
    if kind == "bool":
        return bool(a)
    if kind == "int":
        return int(a)
    if kind == "float":
        return float(a)
    if kind == "str":
        return bytes(a).decode("utf-8")
    return np.array(a)


def _decode_like(template, node):
    """Rebuild a value shaped like template from the file's node: the live
    object gives the structure (dict keys, list lengths, tuples), the file
    the values. What the file lacks keeps the template's value."""
    if node is None:
        return template
    if isinstance(node, h5py.Dataset):
        return _decode_leaf(node, _is_tensor(template))
    if isinstance(template, dict):
        return {k: _decode_like(v, node.get(to_path(str(k)))) for k, v in template.items()}
    if isinstance(template, (list, tuple)):
        vals = [_decode_like(v, node.get(str(i))) for i, v in enumerate(template)]
        return type(template)(vals) if isinstance(template, tuple) else vals
    return _decode_tree(node)


def _decode_tree(node):
    if isinstance(node, h5py.Dataset):
        return _decode_leaf(node)
    keys = list(node.keys())
    if keys and all(k.isdigit() for k in keys):
        return [_decode_tree(node[str(i)]) for i in range(len(keys))]
    return {k: _decode_tree(node[k]) for k in keys}


# ---------------------------------------------------------------------------
# What goes in a shard


def param_names(model, optimizer):
    """The optimizer's parameter index (its state_dict's keys) -> the
    parameter's module path, from model.named_parameters()."""
    by_id = {}
    if model is not None:
        for name, p in model.named_parameters():
            by_id.setdefault(id(p), name)
    names, i = {}, 0
    for g in optimizer.param_groups:
        for p in g["params"]:
            names[i] = by_id.get(id(p), "param_%d" % i)
            i += 1
    return names


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


def collect(model=None, optimizer=None, scheduler=None, scaler=None, rng=True, data_position=None, extra=None):
    """The shard's datasets, in file order: [(path, array, kind)]."""
    out = []
    if model is not None:
        for name, v in model.state_dict().items():
            _encode(v, "/model/" + to_path(name), out)
    if optimizer is not None:
        sd = optimizer.state_dict()
        names = param_names(model, optimizer)
        groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
        _encode(groups, "/optimizer/param_groups", out)
        # state keys sorted (exp_avg, exp_avg_sq, step): a loaded optimizer's
        # per-parameter dicts need not keep the order the live one had
        keys = sorted({k for s in sd["state"].values() for k in s})
        for k in keys:
            for idx in sorted(sd["state"]):
                if k in sd["state"][idx]:
                    _encode(sd["state"][idx][k], f"/optimizer/{to_path(k)}/{to_path(names[idx])}", out)
    if scheduler is not None:
        _encode(scheduler.state_dict(), "/scheduler", out)
    if scaler is not None:
        _encode(scaler.state_dict(), "/grad_scaler", out)
    if rng:
        _encode(rng_state(), "/rng", out)
    if data_position is not None:
        _encode(data_position, "/data", out)
    if extra is not None:
        _encode(extra, "/extra", out)
    seen = set()
    for p, _, _ in out:
        if p in seen:
            raise CheckpointError(EX_USAGE, f"two values would be saved as {p}")
        seen.add(p)
    return out


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
    fid = h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_EXCL, fcpl=fcpl, fapl=fapl)
    with h5py.File(fid) as f:
        made = {""}

        def group(p):  # p: "a/b/c" -> the group, made on demand, in order
            if p not in made:
                parent, _, name = p.rpartition("/")
                group(parent)
                h5py.h5g.create(f[parent or "/"].id, name.encode(), gcpl=gcpl)
                made.add(p)
            return f[p or "/"]

        g = group("meta")
        g.attrs["format"] = _fixed_str(FORMAT)
        for k in ("format_version", "rank", "world_size"):
            g.attrs[k] = np.int32(meta[k])
        g.attrs["iteration"] = np.int64(meta["iteration"])
        for p, a, kind in datasets:
            parent, _, name = p.strip("/").rpartition("/")
            ds = group(parent).create_dataset(name, data=a, track_times=track)
            if kind not in ("tensor", "ndarray"):  # plain arrays carry no attribute
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
    model=None,
    optimizer=None,
    scheduler=None,
    scaler=None,
    rng=True,
    data_position=None,
    extra=None,
    args=None,
    rank=0,
    world_size=1,
):
    """Write CKPT_ROOT/iter_%07d/ for step. With world_size 1 this writes the
    shard, manifest.json, args.json and COMPLETE (last). With world_size > 1
    each rank writes its shard and a manifest fragment; after a barrier,
    rank 0 calls finalize(). Returns the iteration directory."""
    if not (0 <= rank < world_size) or step < 0:
        raise CheckpointError(EX_USAGE, f"bad rank {rank} of {world_size} or step {step}")
    d = os.path.join(ckpt_root, iter_dirname(step))
    if os.path.exists(os.path.join(d, COMPLETE_NAME)):
        raise CheckpointError(EX_IOERR, f"refusing to overwrite the complete checkpoint {d}")
    datasets = collect(model, optimizer, scheduler, scaler, rng, data_position, extra)
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
# Loading


def open_checkpoint(d, rank=0):
    """Verify d (COMPLETE, the manifest it names, this rank's shard) and open
    the shard. Returns (h5py.File, manifest dict)."""
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
        entry = next(s for s in man["shards"] if s["rank"] == rank)
    except (ValueError, KeyError, TypeError, StopIteration) as e:
        raise CheckpointError(EX_DATAERR, f"{d}/{MANIFEST_NAME}: malformed, or no shard for rank {rank}") from e
    if entry["file"] != shard_filename(rank, man.get("world_size", 0)):
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
    if fmt != FORMAT.encode() or int(m.attrs["format_version"]) != FORMAT_VERSION:
        f.close()
        raise CheckpointError(EX_DATAERR, f"{sp}: not a {FORMAT} version {FORMAT_VERSION} shard")
    return f, man


def load(
    ckpt_dir,
    *,
    model=None,
    optimizer=None,
    scheduler=None,
    scaler=None,
    rng=True,
    rank=0,
    strict=True,
):
    """Restore what save() wrote into the live objects given. Returns a dict
    with 'iteration', 'data_position' and 'extra' (None when not saved).
    strict: every model tensor and the optimizer must be in the file."""
    f, _ = open_checkpoint(ckpt_dir, rank)
    with f:
        it = int(f["meta"].attrs["iteration"])
        if model is not None:
            sd = model.state_dict()
            g = f.get("model")
            missing = [k for k in sd if g is None or to_path(k) not in g]
            if strict and missing and any(_is_tensor(sd[k]) for k in missing):
                raise CheckpointError(EX_DATAERR, f"{ckpt_dir}: no /model/{to_path(missing[0])} in the shard")
            model.load_state_dict({k: _decode_like(v, g.get(to_path(k)) if g else None) for k, v in sd.items()})
        if optimizer is not None:
            g = f.get("optimizer")
            if g is None:
                if strict:
                    raise CheckpointError(EX_DATAERR, f"{ckpt_dir}: no /optimizer in the shard")
            else:
                sd = optimizer.state_dict()
                names = param_names(model, optimizer)
                index = {to_path(n): i for i, n in names.items()}
                groups = [{k: v for k, v in pg.items() if k != "params"} for pg in sd["param_groups"]]
                groups = _decode_like(groups, g.get("param_groups"))
                for pg, new in zip(sd["param_groups"], groups):
                    pg.update(new)
                state = {}
                for key in g:
                    if key == "param_groups":
                        continue

                    def visit(p, node, key=key):
                        if isinstance(node, h5py.Dataset):
                            if p not in index:
                                raise CheckpointError(EX_DATAERR, f"{ckpt_dir}: /optimizer/{key}/{p} names no parameter of this optimizer")
                            state.setdefault(index[p], {})[from_path(key)] = _decode_leaf(node, True)

                    g[key].visititems(visit)
                sd["state"] = {i: state[i] for i in sorted(state)}
                optimizer.load_state_dict(sd)
        if scheduler is not None and "scheduler" in f:
            scheduler.load_state_dict(_decode_like(scheduler.state_dict(), f["scheduler"]))
        if scaler is not None and "grad_scaler" in f:
            scaler.load_state_dict(_decode_like(scaler.state_dict(), f["grad_scaler"]))
        if rng and "rng" in f:
            set_rng_state(_decode_tree(f["rng"]))
        data = _decode_tree(f["data"]) if "data" in f else None
        extra = _decode_tree(f["extra"]) if "extra" in f else None
    return {"iteration": it, "data_position": data, "extra": extra}


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
