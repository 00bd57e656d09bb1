"""Two torch.distributed.checkpoint (DCP) directories compared entry by
entry from their .metadata, without loading what is equal (docs/compare.md,
"PyTorch formats").

A DCP directory is a .metadata pickle (which key is a tensor of what dtype
and size, in which chunks; where each chunk's bytes are: file, offset,
length) and one or more *.distcp files, one per saving rank
(__<rank>_<n>.distcp). With the default torch.save serialisation each
tensor chunk and each non-tensor value is one torch.save blob at its
offset, and torch.save writes equal tensors as equal bytes. So:

- a tensor whose chunks have the same offsets and sizes on both sides is
  compared chunk by chunk, blob bytes against blob bytes (memcmp of the
  mapped files); only a chunk whose blobs differ is decoded, and only a
  tensor whose values differ is assembled for the detailed report;
- a tensor chunked differently on the two sides (saved by another world
  size) is assembled on both sides and compared by its values, by name;
- a non-tensor value (BytesStorageMetadata) is compared by its blob, and
  decoded and compared leaf by leaf only when the blobs differ.

What differs by construction and is never counted: StorageMeta's
checkpoint_id (the directory the save was given), save_id and load_id
(random per save and load), and where each entry's bytes sit (file names,
offsets: storage_data), which the comparison follows instead. Everything
else in .metadata is state and is compared: each key's kind, dtype, size
and chunk layout, planner_data (the names), the format version and
StorageMeta.modules.

Each difference names the tensor and the rank file holding its first
differing element (the chunk containing it), so a report reads
`model/layers.0.weight in ckpt/iter_0000005/__1_0.distcp`.
"""

import collections
import ctypes
import ctypes.util
import io
import mmap
import os
import pathlib
import pickle
import stat

from .errors import EX_DATAERR, CheckpointError

METADATA_NAME = ".metadata"
MAX_METADATA_BYTES = 1 << 30  # .metadata is a table of keys: a GiB is no DCP's

_libc = None

# ---------------------------------------------------------------------------
# .metadata without torch. The pickle names DCP's dataclasses, torch dtypes,
# layouts, memory formats and torch.Size; here each becomes a plain stand-in
# with the same attributes, so two equal checkpoints are compared without
# importing torch (a second or more of a comparison's time) and without
# instantiating anything the pickle names beyond this list. torch is
# imported only to decode entries whose bytes differ.

_META = "torch.distributed.checkpoint.metadata"
_FS = "torch.distributed.checkpoint.filesystem"


class Refused(pickle.UnpicklingError):
    pass


class Record:
    """A DCP metadata dataclass, as its attributes."""

    kind = "Record"

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}  # (dict, slots)
        if isinstance(state, tuple) and self.kind == "TensorProperties":
            names = ("dtype", "layout", "requires_grad", "memory_format", "pin_memory")
            state = dict(zip(names, state))
        if not isinstance(state, dict):
            raise Refused(f"a {self.kind} with a {type(state).__name__} state")
        self.__dict__.update(state)

    def __repr__(self):
        return f"{self.kind}({', '.join(f'{k}={v!r}' for k, v in sorted(self.__dict__.items()))})"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):  # MetadataIndex is a dict key; its index is a hint, not identity
        return hash((self.kind, self.__dict__.get("fqn"), tuple(self.__dict__.get("offset") or ())))


def _record(name):
    return type(name, (Record,), {"kind": name})


_RECORDS = {(mod, n): _record(n) for mod, names in (
    (_META, ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata", "TensorProperties", "MetadataIndex", "StorageMeta")),
    (_FS, ("_StorageInfo",)),
) for n in names}


class Size(tuple):
    """torch.Size."""


class DType:
    """A torch dtype by name (torch.float32 -> DType('float32'))."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __str__(self):
        return "torch." + self.name

    __repr__ = __str__


def _mem_format(code):
    return ("memory_format", int(code))


def _layout(name):
    return ("layout", str(name))


class _LightUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        rec = _RECORDS.get((module, name))
        if rec is not None:
            return rec
        if (module, name) == ("torch", "Size"):
            return Size
        if (module, name) == ("torch.serialization", "_get_layout"):
            return _layout
        if (module, name) == (_META, "_MEM_FORMAT_ENCODING"):
            return _mem_format
        if module == "torch" and _is_dtype_name(name):
            return DType(name)
        if module == "pathlib" and name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"):
            return pathlib.PurePosixPath if "Posix" in name else pathlib.PureWindowsPath
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) in (("builtins", "set"), ("builtins", "frozenset")):
            return set if name == "set" else frozenset
        raise Refused(f"names {module}.{name}, not a torch.distributed.checkpoint metadata class")


_DTYPES = {
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64",
    "bool", "complex32", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "double", "float", "half", "long", "int", "short",
    "cfloat", "cdouble", "chalf", "bits8", "bits16",
}


def _is_dtype_name(name):
    return name in _DTYPES


def read_metadata_light(path):
    """A DCP directory's .metadata as stand-ins (no torch import): the
    regular file checked and bounded, anything outside DCP's metadata
    classes refused (65) without running it."""
    mpath = os.path.join(path, METADATA_NAME)
    st = regular_file(mpath, "its .metadata")
    if st.st_size > MAX_METADATA_BYTES:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {st.st_size} bytes, over the {MAX_METADATA_BYTES} a DCP .metadata may have here")
    try:
        with open(mpath, "rb") as f:
            md = _LightUnpickler(f).load()
    except Refused as e:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {e}: refused (--unsafe-pickle loads it, running its code)") from e
    except OSError as e:
        raise CheckpointError(EX_DATAERR, f"{mpath}: {e.strerror or e}") from e
    except Exception as e:  # truncated or not a pickle
        raise CheckpointError(EX_DATAERR, f"{mpath}: corrupt torch.distributed.checkpoint metadata ({type(e).__name__}: {e})") from e
    if getattr(md, "kind", None) != "Metadata":
        raise CheckpointError(EX_DATAERR, f"{mpath}: holds a {type(md).__name__}, not torch.distributed.checkpoint Metadata")
    for attr in ("state_dict_metadata", "storage_data"):
        if not isinstance(getattr(md, attr, None), dict):
            raise CheckpointError(EX_DATAERR, f"{mpath}: its Metadata has no {attr} table")
    for k, v in md.storage_data.items():
        if getattr(k, "kind", None) != "MetadataIndex" or getattr(v, "kind", None) != "_StorageInfo":
            raise CheckpointError(EX_DATAERR, f"{mpath}: a storage_data entry that is not MetadataIndex -> _StorageInfo")
    if not hasattr(md, "planner_data"):
        md.planner_data = None
    if not hasattr(md, "storage_meta"):
        md.storage_meta = None
    return md


def kind_of(entry):
    """'tensor', 'bytes' or None for a state_dict_metadata entry (a stand-in
    or torch's own class)."""
    name = getattr(entry, "kind", None) or type(entry).__name__
    return {"TensorStorageMetadata": "tensor", "BytesStorageMetadata": "bytes"}.get(name)


def torch_dtype(torch, dtype):
    """A real torch dtype for a stand-in (or a real one)."""
    if isinstance(dtype, DType):
        return getattr(torch, dtype.name)
    return dtype


def _memcmp():
    """libc's memcmp (mapped bytes compared in place, ~10 GB/s), or None."""
    global _libc  # a handle on the C library, loaded once: not state
    if _libc is None:
        name = ctypes.util.find_library("c")
        lib = ctypes.CDLL(name) if name else None
        if lib is not None:
            lib.memcmp.restype = ctypes.c_int
            lib.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        _libc = lib or False
    return _libc.memcmp if _libc else None


def _kind_of(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path, what):
    """stat(path) of a regular file, or CheckpointError 65 saying what it is
    (a FIFO would block the reader for ever, a device never ends)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise CheckpointError(EX_DATAERR, f"{path}: {what}: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(EX_DATAERR, f"{path}: {what} is {_kind_of(st.st_mode)}, not a regular file")
    return st


class Side:
    """One DCP directory: its metadata and its files, mapped on demand."""

    def __init__(self, path, metadata):
        self.path = path
        self.md = metadata
        self.maps = {}
        # storage_data by (fqn, chunk offsets): MetadataIndex's own index
        # field is a lookup hint, not part of its identity
        self.where = {(i.fqn, tuple(i.offset) if getattr(i, "offset", None) is not None else None): info for i, info in metadata.storage_data.items()}
        planner = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
        self.paths = planner

    def _map(self, rel):
        m = self.maps.get(rel)
        if m is None:
            p = os.path.join(self.path, rel)
            st = regular_file(p, "a DCP data file")
            if st.st_size == 0:
                m = b""
            else:
                with open(p, "rb") as f:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self.maps[rel] = m
        return m

    def blob_of_file(self, rel):
        """(memoryview of the whole file, rel, None)."""
        return memoryview(self._map(rel)), rel, None

    def blob(self, fqn, offset):
        """(memoryview of the entry's bytes, relative path, offset) or CheckpointError."""
        info = self.where.get((fqn, tuple(offset) if offset is not None else None))
        if info is None:
            raise CheckpointError(EX_DATAERR, f"{self.path}/{METADATA_NAME}: no storage entry for {fqn} at {list(offset or [])}")
        rel = info.relative_path
        if not rel or os.path.isabs(rel) or ".." in rel.split("/"):
            raise CheckpointError(EX_DATAERR, f"{self.path}/{METADATA_NAME}: {fqn} is stored in {rel!r}, outside the directory")
        m = self._map(rel)
        if info.offset < 0 or info.length < 0 or info.offset + info.length > len(m):
            raise CheckpointError(EX_DATAERR, f"{self.path}/{rel}: {fqn}'s bytes [{info.offset}, {info.offset + info.length}) lie beyond the file's {len(m)} bytes (truncated?)")
        return memoryview(m)[info.offset : info.offset + info.length], rel, info

    def close(self):
        for m in self.maps.values():
            if isinstance(m, mmap.mmap):
                try:
                    m.close()
                except BufferError:  # a view still alive: the GC closes it
                    pass
        self.maps = {}


def same_bytes(x, y):
    """Whether two memoryviews hold the same bytes."""
    if len(x) != len(y):
        return False
    if len(x) == 0:
        return True
    cmp = _memcmp()
    if cmp is not None:
        import numpy as np  # noqa: PLC0415 (an address for memcmp, no copy)

        ax, ay = np.frombuffer(x, dtype=np.uint8), np.frombuffer(y, dtype=np.uint8)
        return cmp(ax.ctypes.data, ay.ctypes.data, len(x)) == 0
    return x == y


def numpy_globals(torch):
    """A context in which weights_only loads also take numpy arrays and
    scalars of numbers: the globals a pickled numpy generator state names
    (np.random.get_state() in the Hugging Face Trainer's rng_state.pth and
    Megatron-LM's rng_state), which torch refuses by default. They build
    arrays from a dtype and bytes and run nothing else; the Trainer loads
    its own file with the same list (transformers' safe_globals). Without
    numpy, or RC_PY_TEST_NO_NUMPY_ARRAYS=1 (a test's control: refused as
    before) or a torch without safe_globals, torch's default list."""
    import contextlib  # noqa: PLC0415

    safe_globals = getattr(torch.serialization, "safe_globals", None)  # torch >= 2.5
    if safe_globals is None or os.environ.get("RC_PY_TEST_NO_NUMPY_ARRAYS") == "1":
        return contextlib.nullcontext()
    try:
        import numpy as np  # noqa: PLC0415
    except ImportError:
        return contextlib.nullcontext()
    core = getattr(np, "_core", None) or np.core  # numpy 2 / 1
    kinds = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
             np.float16, np.float32, np.float64, np.complex64, np.complex128)
    allowed = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype] + [type(np.dtype(k)) for k in kinds]
    return safe_globals(allowed)


def decode(blob, unsafe, torch, what):
    """A torch.save blob's object (weights_only unless unsafe)."""
    try:
        with numpy_globals(torch):
            return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=not unsafe)
    except Exception as e:  # a corrupt blob: RuntimeError, UnpicklingError, EOFError, ...
        text = str(e).strip().splitlines()
        raise CheckpointError(EX_DATAERR, f"{what}: cannot decode its torch.save bytes ({type(e).__name__}: {text[0] if text else ''})") from e


def chunk_boxes(tmeta):
    """[(offsets, sizes)] of a TensorStorageMetadata's chunks, in order."""
    return sorted((tuple(c.offsets), tuple(c.sizes)) for c in tmeta.chunks)


def assemble(side, fqn, tmeta, unsafe, torch):
    """The whole tensor of fqn from its chunks."""
    full = torch.empty(tuple(tmeta.size), dtype=torch_dtype(torch, tmeta.properties.dtype))
    for offsets, sizes in chunk_boxes(tmeta):
        blob, rel, _ = side.blob(fqn, offsets)
        t = decode(blob, unsafe, torch, f"{side.path}/{rel}: {fqn}")
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(sizes):
            raise CheckpointError(EX_DATAERR, f"{side.path}/{rel}: {fqn}'s chunk at {list(offsets)} holds {type(t).__name__} {list(getattr(t, 'shape', []))}, its metadata says {list(sizes)}")
        full[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))] = t
    return full


def file_of_index(side, fqn, tmeta, index):
    """The relative path of the file holding element `index` (a flat,
    row-major index into the whole tensor) of fqn, or None."""
    size = tuple(tmeta.size)
    coords, rest = [], index
    for d in reversed(size):
        coords.append(rest % d if d else 0)
        rest = rest // d if d else 0
    coords.reverse()
    for offsets, sizes in chunk_boxes(tmeta):
        if all(o <= c < o + s for c, o, s in zip(coords, offsets, sizes)):
            info = side.where.get((fqn, offsets))
            return info.relative_path if info is not None else None
    return None


def files_of(side, fqn, tmeta):
    """The files holding any chunk of fqn, sorted."""
    out = set()
    for offsets, _ in chunk_boxes(tmeta):
        info = side.where.get((fqn, offsets))
        if info is not None:
            out.add(info.relative_path)
    return sorted(out)


def data_files(path):
    """The *.distcp files of a DCP directory, each checked to be a regular file."""
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".distcp"))
    except OSError as e:
        raise CheckpointError(EX_DATAERR, f"{path}: {e.strerror or e}") from e
    for n in names:
        regular_file(os.path.join(path, n), "a DCP data file")
    return names
