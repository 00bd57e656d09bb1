"""Atomic file writes: temp file in the same directory, fsync, rename, fsync
of the directory (docs/checkpoint-format.md). A name that exists and is not a
regular file is never renamed over."""

import contextlib
import os
import stat

from .errors import CheckpointError, EX_IOERR


def check_target(path):
    """Refuse a target that exists and is not a regular file (a FIFO, a
    device, a directory): renaming over it would replace what is not ours."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(EX_IOERR, f"{path}: exists and is not a regular file; not replaced")


def tmp_name(path):
    return f"{path}.tmp.{os.getpid()}"


def fsync_dir(dirpath):
    fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp, path):
    """fsync tmp, rename it to path, fsync the directory."""
    check_target(path)
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def staged(path):
    """The temp name to write path's new content under; the body writes it
    and commits (commit, or os.replace where durability is not wanted). On
    any error the temp file is removed, and an OSError becomes
    CheckpointError(EX_IOERR) naming path."""
    check_target(path)
    tmp = tmp_name(path)
    try:
        yield tmp
    except OSError as e:
        _unlink_quiet(tmp)
        raise CheckpointError(EX_IOERR, f"{path}: {e.strerror or e}") from e
    except BaseException:
        _unlink_quiet(tmp)
        raise


def write_bytes(path, data):
    """Write data to path atomically."""
    with staged(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
        commit(tmp, path)


def _unlink_quiet(path):
    try:
        os.unlink(path)
    except OSError:
        pass
