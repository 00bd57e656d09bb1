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
import mmap
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile
import zlib

from . import _atomic, dcp
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
        m = os.path.join(path, dcp.METADATA_NAME)
        if os.path.lexists(m):
            dcp.regular_file(m, "its .metadata")  # a FIFO or a device is said as such
            return KIND_DCP
        raise CheckpointError(EX_DATAERR, f"{path}: a directory without .metadata: not a torch.distributed.checkpoint directory")
    dcp.regular_file(path, "a torch.save file")
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


def _records(path):
    """A torch.save zip's records by name below the archive's top folder
    (named after the file: equal state saved under two names differs
    there by construction), each as (ZipInfo, offset of its bytes)."""
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as e:
        raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file (zip archive: {e})") from e
    out = {}
    with z, open(path, "rb") as f:
        for info in z.infolist():
            f.seek(info.header_offset)
            head = f.read(30)
            if len(head) < 30 or head[:4] != b"PK\x03\x04":
                raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file: record {info.filename!r} has no local header")
            n, m = struct.unpack("<HH", head[26:30])
            out[info.filename.split("/", 1)[-1]] = (info, info.header_offset + 30 + n + m)
    return out


def check_differing_records(a, b):
    """Two torch.save zips: every record whose bytes differ between them
    (or that one lacks) checked against its CRC-32, since torch.load checks
    none and a flipped byte must read as a corrupt file, not as a
    difference. Records equal on both sides are not read twice: equal
    bytes cannot be told apart by a checksum anyway. Cost: the differing
    records only, where _check_zip reads every record of a file."""
    ra, rb = _records(a), _records(b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        sa, sb = os.fstat(fa.fileno()).st_size, os.fstat(fb.fileno()).st_size
        ma = mmap.mmap(fa.fileno(), 0, access=mmap.ACCESS_READ) if sa else b""
        mb = mmap.mmap(fb.fileno(), 0, access=mmap.ACCESS_READ) if sb else b""
        try:
            for name in sorted(set(ra) | set(rb)):
                x, y = ra.get(name), rb.get(name)
                vx = memoryview(ma)[x[1] : x[1] + x[0].compress_size] if x else None
                vy = memoryview(mb)[y[1] : y[1] + y[0].compress_size] if y else None
                if x and y and x[0].CRC == y[0].CRC and dcp.same_bytes(vx, vy):
                    continue
                for path, r, v in ((a, x, vx), (b, y, vy)):
                    if r is None:
                        continue
                    info = r[0]
                    if info.compress_type != zipfile.ZIP_STORED:  # torch.save stores; anything else: the zip module checks
                        with zipfile.ZipFile(path) as z:
                            try:
                                z.read(info.filename)
                            except (zipfile.BadZipFile, zlib.error) as e:
                                raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file: record {info.filename!r}: {e}") from e
                    elif len(v) != info.compress_size or zlib.crc32(v) != info.CRC:
                        raise CheckpointError(EX_DATAERR, f"{path}: corrupt torch.save file: record {info.filename!r} does not match its CRC-32")
                del vx, vy
        finally:
            for m in (ma, mb):
                if isinstance(m, mmap.mmap):
                    try:
                        m.close()
                    except BufferError:
                        pass


def load_torch_save(path, unsafe=False, crc_checked=False):
    """A torch.save file's object, on the CPU, its storages mapped.
    crc_checked: the caller checked the records that matter
    (check_differing_records), else every record is checked here."""
    torch = _torch()
    is_zip = zipfile.is_zipfile(path)
    if is_zip:
        if not crc_checked:
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
        with dcp.numpy_globals(torch):
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


def read_metadata(path, unsafe=False):
    """A DCP directory's .metadata (a regular file, bounded), through the
    restricted unpickler unless unsafe."""
    torch = _torch()
    from torch.distributed.checkpoint.metadata import Metadata  # noqa: PLC0415

    mpath = os.path.join(path, dcp.METADATA_NAME)
    st = dcp.regular_file(mpath, "its .metadata")
    if st.st_size > dcp.MAX_METADATA_BYTES:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {st.st_size} bytes, over the {dcp.MAX_METADATA_BYTES} a DCP .metadata may have here")
    try:
        with open(mpath, "rb") as f:
            md = (pickle.Unpickler(f) if unsafe else _MetadataUnpickler(f)).load()
    except _Refused as e:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {e}: refused (--unsafe-pickle loads it, running its code)") from e
    except OSError as e:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {e.strerror or e}") from e
    except Exception as e:  # truncated or not a pickle: EOFError, UnpicklingError, ValueError, ...
        raise CheckpointError(EX_DATAERR, f"{mpath}: corrupt torch.distributed.checkpoint metadata ({type(e).__name__}: {e})") from e
    if not isinstance(md, Metadata):
        raise CheckpointError(EX_DATAERR, f"{mpath}: holds a {type(md).__name__}, not torch.distributed.checkpoint Metadata")
    del torch
    return md


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

    dcp.data_files(path)  # every *.distcp a regular file: a FIFO would block the reader
    md = None if unsafe else read_metadata(path)

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
            with dcp.numpy_globals(torch):
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


# Bounds on what one checkpoint may expand to. A pickle can name one list
# from many places (its memo), so 2 KB may unfold to 10^9 leaves; such a file
# is refused (65) before it is expanded, not compared until memory runs out.
MAX_ENTRIES = 10_000_000  # dict entries, list items and leaves visited
MAX_DEPTH = 200  # nesting: deeper than any state dict, shallower than Python's stack


def _check_expanded_size(obj, what):
    """Refuse (65) obj if expanding it would visit more than MAX_ENTRIES
    entries: each container's expanded size counted once (by identity), so
    a structure that names one list from many places costs what it holds,
    not what it unfolds to."""
    sizes = {}

    def size(v, depth):
        if depth > MAX_DEPTH:
            raise CheckpointError(EX_DATAERR, f"{what or 'the checkpoint'}: nested more than {MAX_DEPTH} levels deep: refused")
        if isinstance(v, dict):
            items = v.values()
        elif isinstance(v, (list, tuple)):
            items = v
        else:
            return 1
        known = sizes.get(id(v))
        if known is not None:
            return known
        n = 1 + sum(size(x, depth + 1) for x in items)
        sizes[id(v)] = n
        if n > MAX_ENTRIES:
            raise CheckpointError(
                EX_DATAERR,
                f"{what or 'the checkpoint'}: more than {MAX_ENTRIES} entries once its shared references are expanded "
                f"(a pickle that names one container from many places): refused",
            )
        return n

    size(obj, 0)


def flatten(obj, prefix="", flat=None, what=""):
    """obj's leaves by name (below prefix, into flat when given). Refuses
    (65) a structure of more than MAX_ENTRIES entries or MAX_DEPTH levels."""
    torch = _torch()
    np = sys.modules.get("numpy")
    flat = flat if flat is not None else Flat()
    storages = {}
    count = [0]
    _check_expanded_size(obj, what)

    def visit(v, name, depth=0):
        count[0] += 1
        if count[0] > MAX_ENTRIES:
            raise CheckpointError(
                EX_DATAERR,
                f"{what or 'the checkpoint'}: more than {MAX_ENTRIES} entries once its shared references are expanded "
                f"(a pickle that names one container from many places): refused",
            )
        if depth > MAX_DEPTH:
            raise CheckpointError(EX_DATAERR, f"{what or 'the checkpoint'}: {name[:80]}...: nested more than {MAX_DEPTH} levels deep: refused")
        visit_one(v, name, depth)

    def visit_one(v, name, depth):
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
            visit(torch.from_numpy(np.ascontiguousarray(v)), name, depth)
        elif isinstance(v, dict):
            if not v:
                flat.values[flat._add(name)] = {"type": "dict", "len": 0}
            for k, x in v.items():
                visit(x, _join(name, _key(k)), depth + 1)
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            if not v:
                flat.values[flat._add(name)] = {"type": "list", "len": 0}
            for i, x in enumerate(v):
                visit(x, _join(name, str(i)), depth + 1)
        elif isinstance(v, torch.Size):
            flat.values[flat._add(name)] = {"type": "torch.Size", "value": list(v)}
        elif hasattr(v, "__dict__") and type(v).__name__ in ("Namespace", "SimpleNamespace"):
            visit(vars(v), name, depth + 1)  # Megatron's saved args (an --unsafe-pickle load)
        else:
            flat.values[flat._add(name)] = _leaf_value(v, name or ROOT_NAME)

    visit(obj, prefix)
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


def _diff(kind, name, detail, file=""):
    return {"kind": kind, "failing": kind != "informational", "file": file, "object": name, "detail": detail}


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


class Plan:
    """What a comparison found before the C comparison: value differences,
    the tensor pairs whose bytes differ (or that one side lacks, or whose
    dtype or shape differ), which the C `compare` then reports in detail,
    and the counts."""

    def __init__(self):
        self.vdiffs = []
        self.pairs = {}  # name -> (tensor of A or None, tensor of B or None)
        self.n_values = self.n_tensors = self.n_ignored = 0
        self.views_a, self.views_b = [], []
        self.files_compared = self.files_identical = 0
        self.by_construction = []  # what differs by construction (informational)
        self.file_of = None  # (name, C diff) -> the rank file a difference sits in, or ""


def _plan_loaded(fa, fb, ignore, deep):
    """Two flattened states: values compared here, tensors compared here by
    their bytes; only the pairs that differ go on to the C comparison."""
    plan = Plan()
    plan.vdiffs, plan.n_values, plan.n_tensors, plan.n_ignored, skip = compare_flats(fa, fb, ignore)
    plan.views_a, plan.views_b = fa.views, fb.views
    for name in sorted(set(fa.tensors) | set(fb.tensors), key=_order):
        if name in skip:
            continue
        ta, tb = fa.tensors.get(name), fb.tensors.get(name)
        if not deep and ta is not None and tb is not None and ta.dtype == tb.dtype and ta.shape == tb.shape:
            if dcp.same_bytes(memoryview(_tensor_bytes(ta)), memoryview(_tensor_bytes(tb))):
                continue
        plan.pairs[name] = (ta, tb)
    return plan


def _dcp_name(side, fqn):
    """A DCP key's name as flatten() spells the state it loads into: the
    planner's path joined with '/' (the key itself without one)."""
    path = side.paths.get(fqn)
    if not path:
        return fqn
    return "/".join(_key(p) for p in path)


def _plan_dcp(a, b, unsafe, ignore, deep):
    """Two DCP directories compared from their metadata (resumecheck.dcp):
    blobs first, values only where blobs differ. None when a side's storage
    uses transforms (compression, ...) this reader does not decode: the
    caller then loads both whole."""
    if unsafe:  # the real classes, as the user asked: load both whole instead
        return None
    ma, mb = dcp.read_metadata_light(a), dcp.read_metadata_light(b)

    class LazyTorch:  # torch imported on the first decode only: equal pairs never need it
        def __getattr__(self, name):
            return getattr(_torch(), name)

    torch = LazyTorch()
    for md in (ma, mb):
        if any(getattr(info, "transform_descriptors", None) for info in md.storage_data.values()):
            return None
    fa_files, fb_files = dcp.data_files(a), dcp.data_files(b)
    sa, sb = dcp.Side(a, ma), dcp.Side(b, mb)
    plan = Plan()
    try:
        # whole files first: equal files settle every entry they hold at the
        # same place on both sides, one memcmp each
        same_files = set()
        for n in sorted(set(fa_files) & set(fb_files)):
            plan.files_compared += 1
            pa, pb = os.path.join(a, n), os.path.join(b, n)
            if os.path.getsize(pa) == os.path.getsize(pb):
                wa, _, _ = sa.blob_of_file(n)
                wb, _, _ = sb.blob_of_file(n)
                if dcp.same_bytes(wa, wb):
                    same_files.add(n)
                    plan.files_identical += 1
                del wa, wb
        plan.files_compared += len(set(fa_files) ^ set(fb_files)) + 1  # and .metadata
        meta_a, meta_b = {}, {}  # name -> (fqn, TensorStorageMetadata) for the rank files
        names = {}
        for fqn in ma.state_dict_metadata:
            names.setdefault(_dcp_name(sa, fqn), [None, None])[0] = fqn
        for fqn in mb.state_dict_metadata:
            names.setdefault(_dcp_name(sb, fqn), [None, None])[1] = fqn
        blob_files = {}  # value name -> (A's file, B's file)

        def settled(fqn_a, fqn_b, offsets):
            ia, ib = sa.where.get((fqn_a, offsets)), sb.where.get((fqn_b, offsets))
            return (
                ia is not None and ib is not None and ia.relative_path == ib.relative_path and ia.relative_path in same_files
                and ia.offset == ib.offset and ia.length == ib.length
            )

        def tdesc(tm):
            return {"type": "tensor", "desc": f"{str(tm.properties.dtype).replace('torch.', '')}{list(tm.size)}".replace(" ", "")}

        for name in sorted(names, key=_order):
            fqa, fqb = names[name]
            if _ignored(name, ignore):
                plan.n_ignored += 1
                continue
            ea = ma.state_dict_metadata.get(fqa) if fqa else None
            eb = mb.state_dict_metadata.get(fqb) if fqb else None
            ta_meta = dcp.kind_of(ea) == "tensor"
            tb_meta = dcp.kind_of(eb) == "tensor"
            if ta_meta:
                meta_a[name] = (fqa, ea)
            if tb_meta:
                meta_b[name] = (fqb, eb)
            if ea is None or eb is None:
                e, side, fq = (eb, sb, fqb) if ea is None else (ea, sa, fqa)
                if dcp.kind_of(e) == "tensor":
                    plan.n_tensors += 1
                    t = dcp.assemble(side, fq, e, unsafe, torch)
                    plan.pairs[name] = (None, t) if ea is None else (t, None)
                else:
                    blob, rel, _ = side.blob(fq, None)
                    sub = flatten(dcp.decode(blob, unsafe, torch, f"{side.path}/{rel}: {fq}"), name, what=f"{side.path}/{rel}")
                    for n in sub.values:
                        plan.n_values += 1
                        plan.vdiffs.append(_diff("missing_in_a" if ea is None else "missing_in_b", n, f"{_describe(sub.values[n])} in {'B' if ea is None else 'A'} only", rel))
                    for n, t in sub.tensors.items():
                        plan.n_tensors += 1
                        plan.pairs[n] = (None, t) if ea is None else (t, None)
                        blob_files[n] = (rel, rel)
                continue
            if ta_meta and tb_meta:
                plan.n_tensors += 1
                if ea.properties.dtype != eb.properties.dtype or tuple(ea.size) != tuple(eb.size):
                    kind = "dtype" if ea.properties.dtype != eb.properties.dtype else "shape"
                    fa_ = ",".join(dcp.files_of(sa, fqa, ea))
                    plan.vdiffs.append(_diff(kind, name, f"{tdesc(ea)['desc']} vs {tdesc(eb)['desc']}", fa_))
                    continue
                boxes_a, boxes_b = dcp.chunk_boxes(ea), dcp.chunk_boxes(eb)
                if boxes_a == boxes_b and not deep:
                    differing = []
                    for offsets, _ in boxes_a:
                        if settled(fqa, fqb, offsets):
                            continue
                        xa, ra, _ = sa.blob(fqa, offsets)
                        xb, rb, _ = sb.blob(fqb, offsets)
                        if not dcp.same_bytes(xa, xb):
                            differing.append((offsets, xa, xb, ra, rb))
                    same = True
                    for offsets, xa, xb, ra, rb in differing:  # the blobs differ: their values?
                        ca = dcp.decode(xa, unsafe, torch, f"{a}/{ra}: {fqa}")
                        cb = dcp.decode(xb, unsafe, torch, f"{b}/{rb}: {fqb}")
                        if not (isinstance(ca, torch.Tensor) and isinstance(cb, torch.Tensor) and ca.dtype == cb.dtype and ca.shape == cb.shape
                                and dcp.same_bytes(memoryview(_tensor_bytes(ca)), memoryview(_tensor_bytes(cb)))):
                            same = False
                            break
                    if same:
                        continue
                ta_full = dcp.assemble(sa, fqa, ea, unsafe, torch)
                tb_full = dcp.assemble(sb, fqb, eb, unsafe, torch)
                if not deep and dcp.same_bytes(memoryview(_tensor_bytes(ta_full)), memoryview(_tensor_bytes(tb_full))):
                    continue  # chunked otherwise (another world size), the same values
                plan.pairs[name] = (ta_full, tb_full)
                continue
            if dcp.kind_of(ea) == "bytes" and dcp.kind_of(eb) == "bytes":
                xa, ra, _ = sa.blob(fqa, None)
                xb, rb, _ = sb.blob(fqb, None)
                if dcp.same_bytes(xa, xb) and not deep:
                    plan.n_values += 1
                    continue
                fa = flatten(dcp.decode(xa, unsafe, torch, f"{a}/{ra}: {fqa}"), name, what=f"{a}/{ra}")
                fb = flatten(dcp.decode(xb, unsafe, torch, f"{b}/{rb}: {fqb}"), name, what=f"{b}/{rb}")
                sub = _plan_loaded(fa, fb, ignore, deep)
                for d in sub.vdiffs:
                    d["file"] = ra if ra == rb else f"{ra} (B: {rb})"
                plan.vdiffs += sub.vdiffs
                plan.n_values += sub.n_values
                plan.n_tensors += sub.n_tensors
                plan.n_ignored += sub.n_ignored
                for n, pair in sub.pairs.items():
                    plan.pairs[n] = pair
                    blob_files[n] = (ra, rb)
                continue
            # a tensor against a value
            plan.n_values += 1
            da = tdesc(ea) if ta_meta else {"type": "value"}
            db = tdesc(eb) if tb_meta else {"type": "value"}
            plan.vdiffs.append(_diff("dtype", name, f"{_describe(da)} vs {_describe(db)}"))
        # .metadata beyond the entries: what is not by construction
        for what, va, vb in (("version", getattr(ma, "version", None), getattr(mb, "version", None)),
                             ("storage_meta.modules", getattr(ma.storage_meta, "modules", None) if ma.storage_meta else None,
                              getattr(mb.storage_meta, "modules", None) if mb.storage_meta else None)):
            if va != vb:
                plan.vdiffs.append(_diff("attribute", f".metadata:{what}", f"{va!r} vs {vb!r}", dcp.METADATA_NAME))
        ida = _storage_ids(ma)
        idb = _storage_ids(mb)
        if ida != idb:
            plan.by_construction.append(
                f".metadata's StorageMeta differs by construction ({', '.join(k for k in ida if ida[k] != idb.get(k))}: "
                "the directory each save was given and random ids); not state, not counted"
            )
    except BaseException:
        sa.close()
        sb.close()
        raise

    def file_of(name, d):
        if name in blob_files:
            ra, rb = blob_files[name]
            return ra if ra == rb else f"{ra} (B: {rb})"
        fa_, fb_ = None, None
        idx = d.get("first_index")
        if name in meta_a:
            fq, tm = meta_a[name]
            fa_ = dcp.file_of_index(sa, fq, tm, idx) if isinstance(idx, int) and idx >= 0 else ",".join(dcp.files_of(sa, fq, tm))
        if name in meta_b:
            fq, tm = meta_b[name]
            fb_ = dcp.file_of_index(sb, fq, tm, idx) if isinstance(idx, int) and idx >= 0 else ",".join(dcp.files_of(sb, fq, tm))
        if fa_ and fb_ and fa_ != fb_:
            return f"{fa_} (B: {fb_})"
        return fa_ or fb_ or ""

    plan.file_of = file_of
    plan.sides = (sa, sb)
    return plan


def _storage_ids(md):
    sm = getattr(md, "storage_meta", None)
    if sm is None:
        return {}
    return {k: str(getattr(sm, k, None)) for k in ("checkpoint_id", "save_id", "load_id")}


def _run_c(rc_bin, pairs, deep, err):
    """The C comparison of the tensor pairs that differ (safetensors files in
    a temporary directory): its diffs."""
    if not pairs:
        return []
    tmp = tempfile.mkdtemp(prefix="rc-compare-torch.")
    try:
        pa, pb, pj = (os.path.join(tmp, x) for x in ("A.safetensors", "B.safetensors", "compare.json"))
        write_safetensors(pa, {n: t[0] for n, t in pairs.items() if t[0] is not None}, durable=False)
        write_safetensors(pb, {n: t[1] for n, t in pairs.items() if t[1] is not None}, durable=False)
        cmd = [rc_bin, "compare", pa, pb, "--json", pj, "--max-lines", "0"]
        if deep:
            cmd.append("--deep")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        if p.returncode not in (0, 1, 66):
            raise CheckpointError(EX_SOFTWARE, f"resumecheck compare on the converted tensors exited {p.returncode}: {p.stderr.strip()}")
        try:
            with open(pj, encoding="utf-8") as f:
                return json.load(f).get("diffs", [])
        except (OSError, ValueError) as e:
            raise CheckpointError(EX_SOFTWARE, f"resumecheck compare wrote no readable --json: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(a, b, *, ignore=(), max_lines=40, json_out=None, unsafe=False, binary=None, deep=False, out=None, err=None):
    """Compare two torch checkpoints; print the report (to out, default
    stdout; errors to err, default stderr); return the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    ignore = list(ignore)
    result = {"schema": "resumecheck-compare", "version": 1, "a": a, "b": b}
    plan = None
    try:
        rc_bin = find_resumecheck(binary)
        if unsafe:
            print("resumecheck compare-torch: warning: --unsafe-pickle: loading with weights_only=False runs whatever code the files' pickles name; use it only on files you trust", file=err)
        ka, kb = detect(a), detect(b)
        if ka == kb == KIND_DCP:
            plan = _plan_dcp(a, b, unsafe, ignore, deep)
        if plan is None and ka == kb == KIND_SAVE and zipfile.is_zipfile(a) and zipfile.is_zipfile(b):
            check_differing_records(a, b)
            sa, sb = load_torch_save(a, unsafe, crc_checked=True), load_torch_save(b, unsafe, crc_checked=True)
            fa, fb = flatten(sa, what=a), flatten(sb, what=b)
            del sa, sb
            plan = _plan_loaded(fa, fb, ignore, deep)
            plan.files_compared = 1
        if plan is None:
            ka, sa = load(a, unsafe)
            kb, sb = load(b, unsafe)
            fa, fb = flatten(sa, what=a), flatten(sb, what=b)
            del sa, sb
            plan = _plan_loaded(fa, fb, ignore, deep)
            plan.files_compared = 1
        cdiffs = _run_c(rc_bin, plan.pairs, deep, err)
    except CheckpointError as e:
        print(f"resumecheck compare-torch: {e}", file=err)
        if json_out and e.exit_code != EX_USAGE:
            result.update({"exit_code": e.exit_code, "verdict": "error", "error": str(e)})
            _write_json(json_out, result, err)
        return e.exit_code
    finally:
        for side in getattr(plan, "sides", ()):
            side.close()

    tensors = {n: (t[0] if t[0] is not None else t[1]) for n, t in plan.pairs.items()}
    tdiffs = []
    for d in cdiffs:
        name = d.get("object")
        if name in tensors:
            d["detail"] = _raw_note(d.get("detail", ""), tensors[name])
        d["file"] = plan.file_of(name, d) if plan.file_of else ""
        tdiffs.append(d)
    diffs = sorted(tdiffs + plan.vdiffs, key=lambda d: _order(d.get("object", "")))
    info_lines = [_diff("informational", dcp.METADATA_NAME, text, dcp.METADATA_NAME) for text in plan.by_construction]
    n_failing = sum(1 for d in diffs if d.get("failing", True))
    nothing = n_failing == 0 and plan.n_tensors == 0 and plan.n_values == 0 and plan.n_ignored > 0
    code = EX_DIFFERENT if n_failing else EX_NOINPUT if nothing else EX_OK
    diffs += info_lines

    print(f"A: {a} ({ka})\nB: {b} ({kb})", file=out)
    shown = 0
    for d in diffs:
        if 0 <= max_lines == shown:
            print(f"  ... {len(diffs) - shown} more (use --json FILE for the full list)", file=out)
            break
        where = f" in {d['file']}" if d.get("file") and d["object"] != d["file"] else ""
        print("  %-4s %-13s %s%s  %s" % ("FAIL" if d.get("failing", True) else "info", d["kind"], d["object"], where, d["detail"]), file=out)
        shown += 1
    how = "their bytes compared, the differing ones reported by resumecheck compare"
    print(f"{plan.n_tensors} tensors compared ({how}); {plan.n_values} other values compared (floats by their 64 bits)", file=out)
    for side, views in (("A", plan.views_a), ("B", plan.views_b)):
        if views:
            n = len(views)
            print(
                f"{side}: {n} tensor{'s' if n != 1 else ''} non-contiguous, a view or sharing a storage (e.g. {views[0]}): "
                "logical values compared (a contiguous copy), not storages",
                file=out,
            )
    info = len(diffs) - n_failing
    if n_failing:
        line = f"DIFFERENT: {n_failing} difference{'s' if n_failing != 1 else ''}"
    elif nothing:
        line = f"NOTHING COMPARED: nothing compared (every tensor and value ignored: {plan.n_ignored} matched --ignore)"
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
                "tensors_compared": plan.n_tensors,
                "values_compared": plan.n_values,
                "datasets_compared": plan.n_tensors + plan.n_values,
                "files_compared": plan.files_compared,
                "files_identical": plan.files_identical,
                "views_a": plan.views_a,
                "views_b": plan.views_b,
                "unsafe_pickle": bool(unsafe),
                "n_ignored": plan.n_ignored,
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

