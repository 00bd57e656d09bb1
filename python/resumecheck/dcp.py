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

import ctypes
import ctypes.util
import io
import mmap
import os
import stat

from .errors import EX_DATAERR, CheckpointError

METADATA_NAME = ".metadata"
MAX_METADATA_BYTES = 1 << 30  # .metadata is a table of keys: a GiB is no DCP's

_libc = None


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
        self.where = {(i.fqn, tuple(i.offset) if i.offset is not None else None): info for i, info in metadata.storage_data.items()}
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


def decode(blob, unsafe, torch, what):
    """A torch.save blob's object (weights_only unless unsafe)."""
    try:
        return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=not unsafe)
    except Exception as e:  # a corrupt blob: RuntimeError, UnpicklingError, EOFError, ...
        text = str(e).strip().splitlines()
        raise CheckpointError(EX_DATAERR, f"{what}: cannot decode its torch.save bytes ({type(e).__name__}: {text[0] if text else ''})") from e


def chunk_boxes(tmeta):
    """[(offsets, sizes)] of a TensorStorageMetadata's chunks, in order."""
    return sorted((tuple(c.offsets), tuple(c.sizes)) for c in tmeta.chunks)


def assemble(side, fqn, tmeta, unsafe, torch):
    """The whole tensor of fqn from its chunks."""
    full = torch.empty(tuple(tmeta.size), dtype=tmeta.properties.dtype)
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
