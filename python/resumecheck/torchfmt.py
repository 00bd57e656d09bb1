"""PyTorch checkpoints compared by `resumecheck compare` (docs/compare.md,
"PyTorch formats").

A torch.save file (.pt/.pth: a zip of a pickle and its storages) or a
torch.distributed.checkpoint (DCP) directory (.metadata and *.distcp) is
loaded on the CPU and flattened to named leaves: nested dict keys and
list/tuple indices joined with '/', module paths kept as the state dict
names them ('model/decoder.layers.0.self_attention.linear_qkv.weight',
'optimizer/state/0/exp_avg', 'optimizer/param_groups/0/lr', 'iteration').

Tensors go into one safetensors file per side, their exact bytes in their
own dtype, and the C `resumecheck compare` compares the two files, so a
tensor's report (first differing index, values, NaN and signed-zero counts,
ULPs) is the one a safetensors pair gets. The other leaves (int, float,
bool, str, bytes, None, ...) are compared here, exactly: a float by its 64
bits (float.hex shown), so -0.0 vs 0.0 and two NaN payloads differ, and
reported by name in the same listing.

Loading is safe by default: torch.load(weights_only=True), and a DCP's
.metadata (a plain pickle) through an unpickler that admits only DCP's own
metadata classes. unsafe=True (--unsafe-pickle) loads with
weights_only=False: arbitrary code in the file runs.
"""

import fnmatch
import json
import logging
import math
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile

from . import _atomic
from .errors import EX_DATAERR, EX_IOERR, EX_NOINPUT, EX_USAGE, CheckpointError

EX_OK = 0
EX_DIFFERENT = 1
EX_SOFTWARE = 70

KIND_SAVE = "torch.save"
KIND_DCP = "torch.distributed.checkpoint"
ROOT_NAME = "(top level)"  # a file that holds one tensor or value, not a dict
MAX_NAME = 511  # compare_tensors.c's limit on a tensor name

# torch dtype name -> safetensors dtype, for what compare_tensors.c decodes.
_ST_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}


def _torch():
    try:
        import torch  # noqa: PLC0415 (the package works without torch elsewhere)
    except ImportError as e:
        raise CheckpointError(EX_SOFTWARE, f"cannot import torch, needed to read PyTorch checkpoints ({e}): docs/pytorch.md says how to install it") from e
    return torch


# ---------------------------------------------------------------------------
# Loading


def detect(path):
    """KIND_SAVE for a regular file, KIND_DCP for a directory with .metadata."""
    if not os.path.exists(path):
        raise CheckpointError(EX_NOINPUT, f"{path}: no such file or directory")
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, ".metadata")):
            return KIND_DCP
        raise CheckpointError(EX_DATAERR, f"{path}: a directory without .metadata: not a torch.distributed.checkpoint directory")
    if not os.path.isfile(path):
        raise CheckpointError(EX_DATAERR, f"{path}: not a regular file")
    return KIND_SAVE


def _check_zip(path):
    """A torch.save zip's every record against its CRC-32 (torch.load does
    not check them): a flipped byte is a corrupt file, not a difference."""
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as e:
        raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file (zip archive: {e})") from e
    if bad is not None:
        raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file: record {bad!r} does not match its CRC-32")


def load_torch_save(path, unsafe=False):
    torch = _torch()
    is_zip = zipfile.is_zipfile(path)
    if is_zip:
        _check_zip(path)
    else:
        try:
            with open(path, "rb") as f:
                magic = f.read(4)
        except OSError as e:
            raise CheckpointError(EX_DATAERR, f"{path}: {e.strerror or e}") from e
        if magic == b"PK\x03\x04":  # a zip without its central directory: cut short
            raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file: a zip archive with no end-of-central-directory record (truncated?)")
    try:
        # mmap: the storages stay in the page cache, not copied to memory
        return torch.load(path, map_location="cpu", weights_only=not unsafe, mmap=is_zip)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()
        hint = ""
        if not unsafe and "weights only" in str(e).lower():
            hint = " (refused by weights_only=True: the pickle names a class that is not a tensor or container; --unsafe-pickle loads it, running its code)"
            first = [ln.strip().split(". Please")[0] for ln in first if "GLOBAL" in ln or "Unsupported" in ln] or first[:1]
        raise CheckpointError(EX_DATAERR, f"{path}: cannot load as torch.save: {first[0].strip() if first else e}{hint}") from e
    except Exception as e:  # torch raises RuntimeError, OSError, EOFError, ... for a bad file
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(EX_DATAERR, f"{path}: cannot load as torch.save ({type(e).__name__}: {msg})") from e


# What a DCP .metadata pickle may name: DCP's own metadata classes, torch
# dtypes/layouts/Size, paths. Anything else is refused without running it.
_DCP_MODULES = {"torch.distributed.checkpoint.metadata"}
_DCP_GLOBALS = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib", "PureWindowsPath"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
}


class _Refused(pickle.UnpicklingError):
    pass


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        torch = _torch()
        if module in _DCP_MODULES or (module, name) in _DCP_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout, torch.memory_format)):
            return getattr(torch, name)
        raise _Refused(f"names {module}.{name}, not a torch.distributed.checkpoint metadata class")


def load_dcp(path, unsafe=False):
    """A DCP directory as the nested state dict it was saved from, with no
    process group (what dcp_to_torch_save does: FileSystemReader and an
    empty-state-dict planner that rebuilds the structure from .metadata)."""
    torch = _torch()
    try:  # what dcp_to_torch_save uses (torch 2.x; private names, checked here)
        from torch.distributed.checkpoint import FileSystemReader  # noqa: PLC0415
        from torch.distributed.checkpoint._traverse import set_element  # noqa: PLC0415
        from torch.distributed.checkpoint.api import CheckpointException  # noqa: PLC0415 (a BaseException)
        from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner  # noqa: PLC0415
        from torch.distributed.checkpoint.metadata import Metadata, StorageMeta  # noqa: PLC0415
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict  # noqa: PLC0415
    except ImportError as e:
        raise CheckpointError(EX_SOFTWARE, f"{path}: this torch ({torch.__version__}) lacks the torch.distributed.checkpoint reader used here ({e})") from e

    md = None
    if not unsafe:  # read .metadata here, through the restricted unpickler
        mpath = os.path.join(path, ".metadata")
        try:
            with open(mpath, "rb") as f:
                md = _MetadataUnpickler(f).load()
        except _Refused as e:
            raise CheckpointError(EX_DATAERR, f"{mpath}: {e}: refused (--unsafe-pickle loads it, running its code)") from e
        except OSError as e:
            raise CheckpointError(EX_DATAERR, f"{mpath}: {e.strerror or e}") from e
        except Exception as e:  # truncated or not a pickle: EOFError, UnpicklingError, ValueError, ...
            raise CheckpointError(EX_DATAERR, f"{mpath}: corrupt torch.distributed.checkpoint metadata ({type(e).__name__}: {e})") from e
        if not isinstance(md, Metadata):
            raise CheckpointError(EX_DATAERR, f"{mpath}: holds a {type(md).__name__}, not torch.distributed.checkpoint Metadata")

    class Reader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            if md is None:
                return super().read_metadata(*args, **kwargs)
            if getattr(md, "storage_meta", None) is None:
                md.storage_meta = StorageMeta()
            md.storage_meta.load_id = self.load_id
            return md

    class Planner(_EmptyStateDictLoadPlanner):
        def load_bytes(self, read_item, value):
            # the default planner unpickles these with weights_only=False
            obj = torch.load(value, weights_only=not unsafe)
            if self.flatten_state_dict:
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj

    sd = {}
    log = logging.getLogger("torch.distributed.checkpoint")
    was = log.disabled
    try:
        log.disabled = True  # it logs each failure's traceback; the error below says it once
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "torch.distributed is disabled ...": no process group, by design
            _load_state_dict(sd, storage_reader=Reader(path), planner=Planner(), no_dist=True)
    except (Exception, CheckpointException) as e:  # a missing or truncated .distcp, a refused pickle
        cause = e
        failures = getattr(e, "failures", None)  # CheckpointException: {rank: (exception, frames)}
        if failures:
            cause = next(iter(failures.values()))
            cause = cause[0] if isinstance(cause, tuple) else cause
        text = str(cause).strip()
        first = f"{type(cause).__name__}: {text.splitlines()[0]}" if text else type(cause).__name__
        raise CheckpointError(EX_DATAERR, f"{path}: cannot load as torch.distributed.checkpoint ({first})") from e
    finally:
        log.disabled = was
    return sd


def load(path, unsafe=False):
    """(kind, state) for a torch.save file or a DCP directory."""
    kind = detect(path)
    return kind, (load_dcp(path, unsafe) if kind == KIND_DCP else load_torch_save(path, unsafe))


# ---------------------------------------------------------------------------
# Flattening


def _key(k):
    """A dict key as one name component: '/' and '%' escaped, so nesting is
    the only '/'. int keys (an optimizer's state) and the str keys DCP turns
    them into read the same ('0')."""
    s = k if isinstance(k, str) else str(k)
    return s.replace("%", "%25").replace("/", "%2F")


def _join(prefix, k):
    return f"{prefix}/{k}" if prefix else k


def _float_value(x):
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    return {"type": "float", "hex": float.hex(x), "bits": "%016x" % bits, "repr": repr(x)}


def _leaf_value(v, name):
    """A non-tensor leaf as a JSON value: equal JSON <=> equal leaf."""
    torch = _torch()
    if v is None:
        return {"type": "None"}
    if isinstance(v, bool):
        return {"type": "bool", "value": v}
    if isinstance(v, int):
        return {"type": "int", "value": int(v)}
    if isinstance(v, float):
        return _float_value(float(v))
    if isinstance(v, str):
        return {"type": "str", "value": v}
    if isinstance(v, (bytes, bytearray)):
        return {"type": "bytes", "hex": bytes(v).hex()}
    if isinstance(v, complex):
        return {"type": "complex", "real": _float_value(v.real), "imag": _float_value(v.imag)}
    if isinstance(v, torch.dtype):
        return {"type": "torch.dtype", "value": str(v)}
    if isinstance(v, torch.device):
        return {"type": "torch.device", "value": str(v)}
    if isinstance(v, (set, frozenset)):
        return {"type": type(v).__name__, "value": sorted(repr(x) for x in v)}
    np = sys.modules.get("numpy")
    if np is not None and isinstance(v, np.generic):  # numpy scalars (unsafe loads)
        if isinstance(v, np.bool_):
            return {"type": "bool", "value": bool(v)}
        if isinstance(v, np.integer):
            return {"type": "int", "value": int(v)}
        if isinstance(v, np.floating):
            return _float_value(float(v))
    raise CheckpointError(EX_DATAERR, f"{name}: cannot compare a {type(v).__module__}.{type(v).__name__} (not a tensor, number, string or container)")


class Flat:
    """A state flattened: tensors {name: tensor}, values {name: JSON value},
    notes on tensors whose logical values are not their storage."""

    def __init__(self):
        self.tensors = {}
        self.values = {}
        self.views = []  # names of non-contiguous tensors, views and shared storages

    def _add(self, name):
        name = name or ROOT_NAME
        if name in self.tensors or name in self.values:
            raise CheckpointError(EX_DATAERR, f"{name}: two entries flatten to this name (e.g. keys 0 and '0' in one dict)")
        if len(name.encode()) > MAX_NAME:
            raise CheckpointError(EX_DATAERR, f"{name[:80]}...: name over {MAX_NAME} bytes")
        return name


def flatten(obj):
    torch = _torch()
    np = sys.modules.get("numpy")
    flat = Flat()
    storages = {}

    def visit(v, name):
        if isinstance(v, torch.Tensor):
            n = flat._add(name)
            if v.layout != torch.strided:
                raise CheckpointError(EX_DATAERR, f"{n}: a {v.layout} tensor: only dense (strided) tensors are compared")
            if v.device.type != "cpu":
                raise CheckpointError(EX_DATAERR, f"{n}: a tensor on {v.device} (not loadable on the CPU)")
            st = v.untyped_storage()
            key = (st.data_ptr(), st.nbytes())
            if key[0] and st.nbytes() and (v.storage_offset() or not v.is_contiguous() or st.nbytes() != v.numel() * v.element_size() or key in storages):
                flat.views.append(n)
                if key in storages and storages[key] not in flat.views:
                    flat.views.append(storages[key])
            storages.setdefault(key, n)
            flat.tensors[n] = v
        elif np is not None and isinstance(v, np.ndarray) and v.dtype != object:
            visit(torch.from_numpy(np.ascontiguousarray(v)), name)
        elif isinstance(v, dict):
            if not v:
                flat.values[flat._add(name)] = {"type": "dict", "len": 0}
            for k, x in v.items():
                visit(x, _join(name, _key(k)))
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            if not v:
                flat.values[flat._add(name)] = {"type": "list", "len": 0}
            for i, x in enumerate(v):
                visit(x, _join(name, str(i)))
        elif isinstance(v, torch.Size):
            flat.values[flat._add(name)] = {"type": "torch.Size", "value": list(v)}
        elif hasattr(v, "__dict__") and type(v).__name__ in ("Namespace", "SimpleNamespace"):
            visit(vars(v), name)  # Megatron's saved args (an --unsafe-pickle load)
        else:
            flat.values[flat._add(name)] = _leaf_value(v, name or ROOT_NAME)

    visit(obj, "")
    flat.views.sort(key=_order)
    return flat


def _order(name):
    return name.encode()  # compare_tensors.c orders names with strcmp


# ---------------------------------------------------------------------------
# Tensors to safetensors


# dtypes compared through another view of their bytes: complex as (real,
# imaginary) pairs of its float type, anything else as its raw bytes.
_ST_PAIRS = {"complex32": ("F16", "float16"), "complex64": ("F32", "float32"), "complex128": ("F64", "float64")}


def _tensor_layout(t):
    """(safetensors dtype, shape, note or None). A dtype compare_tensors.c
    has no safetensors name for goes as complex pairs (last dimension 2:
    real, imaginary) or as its raw bytes (uint8, last dimension the
    element's bytes); note says so in the report."""
    dt = str(t.dtype).replace("torch.", "")
    shape = list(t.shape)
    if dt in _ST_DTYPES:
        return _ST_DTYPES[dt], shape, None
    real = _dims(dt, shape)
    if dt in _ST_PAIRS:
        st, fl = _ST_PAIRS[dt]
        return st, shape + [2], f"{real} as {_dims(fl, shape + [2])} (real, imaginary)"
    return "U8", shape + [t.element_size()], f"{real} as raw bytes {_dims('uint8', shape + [t.element_size()])} (the last index is the byte within an element)"


def _dims(dtype, shape):
    return dtype + "[" + ",".join(str(d) for d in shape) + "]"


def _tensor_bytes(t):
    torch = _torch()
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous()  # the logical values, not the storage
    if t.numel() == 0:
        return b""
    if sys.byteorder != "little":
        raise CheckpointError(EX_SOFTWARE, "safetensors is little-endian: this host is not")
    return memoryview(t.reshape(-1).view(torch.uint8).numpy())


def write_safetensors(path, tensors, durable=True):
    """tensors {name: tensor} as one safetensors file, names in strcmp
    order, no __metadata__: equal tensors give equal bytes. durable: temp,
    fsync, rename (convert's output); a comparison's scratch files skip
    the fsync."""
    names = sorted(tensors, key=_order)
    header, off = {}, 0
    for n in names:
        st, shape, _ = _tensor_layout(tensors[n])
        size = tensors[n].numel() * tensors[n].element_size()
        header[n] = {"data_offsets": [off, off + size], "dtype": st, "shape": shape}
        off += size
    h = json.dumps(header, separators=(",", ":"), sort_keys=False).encode()
    h += b" " * (-len(h) % 8)
    with _atomic.staged(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for n in names:
                f.write(_tensor_bytes(tensors[n]))
        if durable:
            _atomic.commit(tmp, path)
        else:
            os.replace(tmp, path)


def values_json(flat):
    """The non-tensor leaves (and what a raw-bytes tensor was) as JSON text,
    one entry per line in name order."""
    lines = []
    for n in sorted(flat.values, key=_order):
        lines.append(json.dumps(n) + ": " + json.dumps(flat.values[n], sort_keys=True))
    raw = {n: _tensor_layout(t)[2] for n, t in flat.tensors.items() if _tensor_layout(t)[2]}  # name: note
    body = ",\n".join(lines)
    return (
        '{"format": "resumecheck-torch-values", "version": 1,\n"values": {\n'
        + body
        + "\n},\n\"raw_dtype_tensors\": "
        + json.dumps(raw, sort_keys=True)
        + ",\n\"views\": "
        + json.dumps(flat.views)
        + "}\n"
    ).encode()


def convert(src, out, unsafe=False):
    """src (torch.save file or DCP directory) as OUT/tensors.safetensors and
    OUT/values.json. Returns the Flat."""
    kind, obj = load(src, unsafe)
    flat = flatten(obj)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CheckpointError(EX_IOERR, f"{out}: {e.strerror or e}") from e
    write_safetensors(os.path.join(out, "tensors.safetensors"), flat.tensors)
    _atomic.write_bytes(os.path.join(out, "values.json"), values_json(flat))
    return kind, flat


# ---------------------------------------------------------------------------
# Non-tensor leaves compared


def _fmt_float(v):
    x = float.fromhex(v["hex"]) if v["hex"] != "nan" else float("nan")
    if math.isnan(x):
        return f"nan(0x{v['bits']})"
    return f"{v['repr']} ({v['hex']})"


def _excerpt(s, i, width=24):
    lo = max(0, i - width)
    return ("..." if lo else "") + s[lo : i + width] + ("..." if i + width < len(s) else "")


def _describe(v):
    """A value in a report: type and value."""
    t = v["type"]
    if t == "float":
        return f"float {_fmt_float(v)}"
    if t == "complex":
        return f"complex {_fmt_float(v['real'])} + {_fmt_float(v['imag'])}j"
    if t in ("int", "bool", "torch.dtype", "torch.device", "torch.Size", "set", "frozenset"):
        return f"{t} {v['value']}"
    if t == "str":
        return f"str {json.dumps(_excerpt(v['value'], 0, 40))}"
    if t == "bytes":
        return f"bytes[{len(v['hex']) // 2}]"
    if t in ("dict", "list"):
        return f"empty {t}"
    if t == "tensor":
        return f"tensor {v['desc']}"
    return t


def _value_diff(a, b):
    """(kind, detail) for two different leaves of the same name."""
    if a["type"] != b["type"]:
        return "dtype", f"{_describe(a)} vs {_describe(b)}"
    t = a["type"]
    if t == "float":
        xa, xb = float.fromhex(a["hex"]) if a["hex"] != "nan" else math.nan, float.fromhex(b["hex"]) if b["hex"] != "nan" else math.nan
        note = ""
        if math.isnan(xa) and math.isnan(xb):
            note = "; NaN payloads differ"
        elif math.isnan(xa) != math.isnan(xb):
            note = "; NaN on one side"
        elif xa == xb == 0.0:
            note = "; the sign of zero only"
        elif math.isfinite(xa) and math.isfinite(xb):
            note = f"; |a-b| {abs(xa - xb):.3g}"
        return "values", f"float: {_fmt_float(a)} vs {_fmt_float(b)} (64 bits {a['bits']} vs {b['bits']}){note}"
    if t == "str":
        sa, sb = a["value"], b["value"]
        i = next((k for k in range(min(len(sa), len(sb))) if sa[k] != sb[k]), min(len(sa), len(sb)))
        return "values", f"str: {json.dumps(_excerpt(sa, i))} vs {json.dumps(_excerpt(sb, i))} (first difference at character {i}; lengths {len(sa)} vs {len(sb)})"
    if t == "bytes":
        ha, hb = bytes.fromhex(a["hex"]), bytes.fromhex(b["hex"])
        i = next((k for k in range(min(len(ha), len(hb))) if ha[k] != hb[k]), min(len(ha), len(hb)))
        return "values", f"bytes[{len(ha)}] vs bytes[{len(hb)}], first difference at byte {i}"
    if t == "complex":
        return "values", f"complex: {_fmt_float(a['real'])} + {_fmt_float(a['imag'])}j vs {_fmt_float(b['real'])} + {_fmt_float(b['imag'])}j"
    return "values", f"{t}: {a.get('value')} vs {b.get('value')}"


def _ignored(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(":" + name, p) for p in patterns)


def _diff(kind, name, detail):
    return {"kind": kind, "failing": kind != "informational", "file": "", "object": name, "detail": detail}


def compare_flats(fa, fb, ignore=()):
    """The leaves compared here: non-tensor values, and tensors the C
    comparison is not given (a tensor against a value; converted dtypes
    that differ; --ignore'd names). Returns (diffs, values compared,
    tensor pairs compared (here or by C), names ignored, tensor names to
    leave out of the safetensors files)."""
    diffs, n, n_ign, skip = [], 0, 0, set()

    def tdesc(t):
        return {"type": "tensor", "desc": f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}".replace(" ", "")}

    names = set(fa.values) | set(fb.values)
    for name in sorted(names, key=_order):
        if _ignored(name, ignore):
            n_ign += 1
            skip.add(name)  # a tensor of this name on the other side: ignored too, counted once
            continue
        a = fa.values.get(name) or (tdesc(fa.tensors[name]) if name in fa.tensors else None)
        b = fb.values.get(name) or (tdesc(fb.tensors[name]) if name in fb.tensors else None)
        if name in fa.tensors or name in fb.tensors:
            skip.add(name)  # a tensor against a value: a dtype difference, said here
        n += 1
        if a is None:
            diffs.append(_diff("missing_in_a", name, f"{_describe(b)} in B only"))
        elif b is None:
            diffs.append(_diff("missing_in_b", name, f"{_describe(a)} in A only"))
        elif a != b:
            kind, detail = _value_diff(a, b)
            diffs.append(_diff(kind, name, detail))
    # converted tensors (complex, other float8s): their own dtype and shape,
    # which the view handed to the C comparison would not show
    n_t = 0
    for name in sorted(set(fa.tensors) | set(fb.tensors), key=_order):
        if name in skip:
            continue
        if _ignored(name, ignore):
            n_ign += 1
            skip.add(name)
            continue
        ta, tb = fa.tensors.get(name), fb.tensors.get(name)
        if ta is None or tb is None:
            continue  # missing_in_*: the C comparison says so, with dtype and shape
        n_t += 1
        if (_tensor_layout(ta)[2] or _tensor_layout(tb)[2]) and (ta.dtype != tb.dtype or ta.shape != tb.shape):
            skip.add(name)
            kind = "dtype" if ta.dtype != tb.dtype else "shape"
            diffs.append(_diff(kind, name, f"{tdesc(ta)['desc']} vs {tdesc(tb)['desc']}"))
    return diffs, n, n_t, n_ign, skip


# ---------------------------------------------------------------------------
# The comparison


def find_resumecheck(explicit=None):
    """The C binary: --resumecheck, else $RC_BIN, else `resumecheck` on PATH."""
    for cand in (explicit, os.environ.get("RC_BIN")):
        if cand:
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
            raise CheckpointError(EX_USAGE, f"{cand}: not an executable resumecheck binary")
    found = shutil.which("resumecheck")
    if not found:
        raise CheckpointError(EX_USAGE, "no resumecheck binary: give --resumecheck PATH, set RC_BIN, or put it on PATH")
    return found


def _raw_note(detail, t):
    """Say what a converted tensor was in a C detail that names its view."""
    st, shape, note = _tensor_layout(t)
    if not note:
        return detail
    view = _dims({"F16": "float16", "F32": "float32", "F64": "float64", "U8": "uint8"}[st], shape)
    return note + detail[len(view) :] if detail.startswith(view) else f"{note}: {detail}"


def compare(a, b, *, ignore=(), max_lines=40, json_out=None, unsafe=False, binary=None, deep=False, out=None, err=None):
    """Compare two torch checkpoints; print the report (to out, default
    stdout; errors to err, default stderr); return the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    ignore = list(ignore)
    rc_bin = None
    result = {"schema": "resumecheck-compare", "version": 1, "a": a, "b": b}
    try:
        rc_bin = find_resumecheck(binary)
        if unsafe:
            print("resumecheck compare-torch: warning: --unsafe-pickle: loading with weights_only=False runs whatever code the files' pickles name; use it only on files you trust", file=err)
        ka, sa = load(a, unsafe)
        kb, sb = load(b, unsafe)
        fa, fb = flatten(sa), flatten(sb)
        del sa, sb
        vdiffs, n_values, n_tensors, n_ignored, skip = compare_flats(fa, fb, ignore)
        tmp = tempfile.mkdtemp(prefix="rc-compare-torch.")
        try:
            pa, pb, pj = (os.path.join(tmp, x) for x in ("A.safetensors", "B.safetensors", "compare.json"))
            write_safetensors(pa, {n: t for n, t in fa.tensors.items() if n not in skip}, durable=False)
            write_safetensors(pb, {n: t for n, t in fb.tensors.items() if n not in skip}, durable=False)
            cmd = [rc_bin, "compare", pa, pb, "--json", pj, "--max-lines", "0"]  # --ignore'd tensors are not in the files
            if deep:
                cmd.append("--deep")
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
            if p.returncode not in (0, 1, 66):
                raise CheckpointError(EX_SOFTWARE, f"resumecheck compare on the converted tensors exited {p.returncode}: {p.stderr.strip()}")
            try:
                with open(pj, encoding="utf-8") as f:
                    cres = json.load(f)
            except (OSError, ValueError) as e:
                raise CheckpointError(EX_SOFTWARE, f"resumecheck compare wrote no readable --json: {e}") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except CheckpointError as e:
        print(f"resumecheck compare-torch: {e}", file=err)
        if json_out and e.exit_code != EX_USAGE:
            result.update({"exit_code": e.exit_code, "verdict": "error", "error": str(e)})
            _write_json(json_out, result, err)
        return e.exit_code

    tensors = {**fa.tensors, **fb.tensors}
    tdiffs = []
    for d in cres.get("diffs", []):
        if d.get("object") in tensors:
            d["detail"] = _raw_note(d.get("detail", ""), tensors[d["object"]])
        tdiffs.append(d)
    diffs = sorted(tdiffs + vdiffs, key=lambda d: _order(d.get("object", "")))
    n_failing = sum(1 for d in diffs if d.get("failing", True))
    nothing = n_failing == 0 and n_tensors == 0 and n_values == 0 and n_ignored > 0
    code = EX_DIFFERENT if n_failing else EX_NOINPUT if nothing else EX_OK

    print(f"A: {a} ({ka})\nB: {b} ({kb})", file=out)
    shown = 0
    for d in diffs:
        if 0 <= max_lines == shown:
            print(f"  ... {len(diffs) - shown} more (use --json FILE for the full list)", file=out)
            break
        print("  %-4s %-13s %s  %s" % ("FAIL" if d.get("failing", True) else "info", d["kind"], d["object"], d["detail"]), file=out)
        shown += 1
    print(
        f"{n_tensors} tensors compared (their bytes, as safetensors, by resumecheck compare); "
        f"{n_values} other values compared (floats by their 64 bits)",
        file=out,
    )
    for side, f in (("A", fa), ("B", fb)):
        if f.views:
            n = len(f.views)
            print(
                f"{side}: {n} tensor{'s' if n != 1 else ''} non-contiguous, a view or sharing a storage (e.g. {f.views[0]}): "
                "logical values compared (a contiguous copy), not storages",
                file=out,
            )
    info = len(diffs) - n_failing
    if n_failing:
        line = f"DIFFERENT: {n_failing} difference{'s' if n_failing != 1 else ''}"
    elif nothing:
        line = f"NOTHING COMPARED: nothing compared (every tensor and value ignored: {n_ignored} matched --ignore)"
    else:
        line = "IDENTICAL"
    if info:
        line += f" ({info} informational, not failed)"
    print(line, file=out)

    if json_out:
        result.update(
            {
                "exit_code": code,
                "verdict": "different" if n_failing else "nothing_compared" if nothing else "identical",
                "format_a": ka,
                "format_b": kb,
                "tensors_compared": n_tensors,
                "values_compared": n_values,
                "datasets_compared": n_tensors + n_values,
                "views_a": fa.views,
                "views_b": fb.views,
                "unsafe_pickle": bool(unsafe),
                "n_ignored": n_ignored,
                "n_failing": n_failing,
                "diffs": diffs,
            }
        )
        jc = _write_json(json_out, result, err)
        if jc:
            return jc
    return code


def _write_json(path, obj, err):
    try:
        _atomic.write_bytes(path, (json.dumps(obj, indent=1) + "\n").encode())
    except CheckpointError as e:
        print(f"resumecheck compare-torch: {e}", file=err)
        return e.exit_code
    return 0

