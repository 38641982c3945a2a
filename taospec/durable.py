"""Durable writes: every file taospec keeps is put on disk here, whole or not at all.

:func:`write_atomic` writes the bytes to ``.<name>.<pid>.tmp`` beside the file
(the TAO recorder's temp name, so neither takes the other's temp file for a
record), fsyncs it, renames it over the file with :func:`os.replace` and fsyncs
the folder, so after a crash the file holds the old bytes or the new ones.
:func:`create_exclusive` writes the temp file the same way and hard-links it to
the name, which fails when the name exists: an existing file is never
overwritten, and the name never holds less than the whole file, even when the
writer is killed half way. (The recorder's ``open`` reserves the name empty with
``O_CREAT|O_EXCL`` and renames over it; either way, one of two racing creators
gets the name and the other is told it is taken.)

The temp name carries only the process id, so two threads of one process writing
the same file take turns here. A temp file whose process is gone, and that nobody
has written for :data:`STALE_AFTER`, is debris of a writer that died between
writing and renaming; :func:`sweep_stale_temps` removes those and leaves the
temp files of live writers alone. The age matters: a writer in a container, or
on another host sharing the folder, is alive where this process cannot see it.

A write that fails (no space, a read-only or foreign-owned folder) raises
:class:`WriteFailed`, one line naming the file and the system's reason, and
leaves no temp file behind.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress

from taospec.errors import TaospecError

TEMP_RE = re.compile(r"\..+\.(\d+)\.tmp")
"""A temp file of this module or of the recorder: ``.<name>.<pid>.tmp``."""
STALE_AFTER = 600.0
"""Seconds a temp file stays untouched before a sweep may take it for a dead writer's."""

_turns: dict[str, threading.Lock] = {}
_turns_guard = threading.Lock()


class WriteFailed(TaospecError):
    """A file could not be written (disk full, read-only, not allowed): nothing changed."""

    def __init__(self, path: str | os.PathLike[str], error: OSError) -> None:
        self.path = os.fspath(path)
        self.errno = error.errno
        reason = error.strerror or os.strerror(error.errno or errno.EIO)
        super().__init__(f"cannot write {self.path}: {reason}")


@contextmanager
def flocked(
    path: str | os.PathLike[str], mode: int, *, parents: bool = False, remove: bool = False
) -> Iterator[None]:
    """Hold the exclusive ``flock`` on ``path`` (created with ``mode``, and with its folders
    when ``parents``) for the block.

    With ``remove``, the file exists only while someone holds it or waits for it: the holder
    removes it before letting go. A waiter may then get the lock of a file no name points
    to any more (or of one removed and made again), so it checks, once it holds the lock,
    that ``path`` still names the file it locked, and otherwise locks what the name holds
    now. Of two that hold a lock, one holds a removed file and is not inside."""
    try:
        if parents:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    while True:
        fd = _locked(path, mode)
        if not remove or _names(path, fd):
            break
        os.close(fd)
    try:
        yield
    finally:
        if remove:
            with suppress(OSError):
                os.unlink(path)  # still held: whoever opened it sees it gone once they hold it
        os.close(fd)


def _locked(path: str | os.PathLike[str], mode: int) -> int:
    """A descriptor of ``path`` (created with ``mode``) whose exclusive flock it holds."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _names(path: str | os.PathLike[str], fd: int) -> bool:
    """Whether ``path`` names the file open as ``fd`` (the same device and inode)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def encode_json(data: object) -> bytes:
    """``data`` as the recorder writes a record: ``json.dumps(data, indent=2)`` and a newline."""
    return (json.dumps(data, indent=2) + "\n").encode()


def temp_path(path: str) -> str:
    """Where this process writes ``path`` before renaming it into place."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.{os.getpid()}.tmp"


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, folder fsync."""
    target = os.path.abspath(path)
    with _turn(target):
        temp = temp_path(target)
        try:
            try:
                _write_file(temp, data, mode)
                os.replace(temp, target)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temp)  # a temp file never renamed into place
                raise
            fsync_folder(os.path.dirname(target))
        except OSError as exc:
            raise WriteFailed(target, exc) from None


def write_json_atomic(path: str | os.PathLike[str], data: object) -> None:
    """Durably replace ``path`` with ``data`` as indented JSON, making its folder if needed."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise WriteFailed(folder, exc) from None
    write_atomic(path, encode_json(data))


def create_exclusive(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` unless it exists; return whether it was created.

    The data is written whole to the temp file, which is then linked to ``path``.
    On a file system without hard links the name is reserved with
    ``O_CREAT|O_EXCL`` instead and the temp file renamed over the reservation.
    A failed create leaves no file behind: one that fails, or is interrupted, once the
    name is its file's (the folder's sync, removing the temp) removes the name again.
    """
    target = os.path.abspath(path)
    with _turn(target):
        temp = temp_path(target)
        written: os.stat_result | None = None
        try:
            try:
                _write_file(temp, data, mode)
                written = os.stat(temp)
                if not _link_or_reserve(temp, target, mode):
                    return False
            finally:
                with suppress(FileNotFoundError):
                    os.unlink(temp)  # linked, renamed or abandoned: never left behind
            fsync_folder(os.path.dirname(target))
        except BaseException as exc:
            if written is not None:
                _remove_if_same(target, written)
            if isinstance(exc, OSError):
                raise WriteFailed(target, exc) from None
            raise
    return True


def _remove_if_same(path: str, written: os.stat_result) -> None:
    """Remove ``path`` if it names the file ``written`` describes (the create's own)."""
    with suppress(FileNotFoundError):
        if os.path.samestat(os.stat(path), written):
            os.unlink(path)


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK})
"""What ``link`` says on a file system that has no hard links (FAT, some FUSE mounts)."""


def _link_or_reserve(temp: str, target: str, mode: int) -> bool:
    """Give ``temp``'s file the name ``target`` unless that name exists."""
    try:
        os.link(temp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    else:
        return True
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
    except FileExistsError:
        return False
    try:
        os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(target)
        raise
    return True


def remove(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` if it is there, durably; a failure raises :class:`WriteFailed`."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    with suppress(OSError):
        fsync_folder(os.path.dirname(os.path.abspath(path)))


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename, link or removal in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep_stale_temps(folder: str | os.PathLike[str], names: Iterable[str]) -> list[str]:
    """Remove the temp files among ``names`` whose writing process is gone and that were
    last written more than :data:`STALE_AFTER` ago; return them."""
    removed = []
    before = time.time() - STALE_AFTER
    for name in names:
        found = TEMP_RE.fullmatch(name)
        if found is None or process_alive(int(found.group(1))):
            continue
        path = os.path.join(folder, name)
        with suppress(FileNotFoundError, PermissionError):
            if os.stat(path).st_mtime < before:
                os.unlink(path)
                removed.append(name)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (it may belong to another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_file(path: str, data: bytes, mode: int) -> None:
    """Write all of ``data`` to a new file ``path`` and fsync it.

    A file left at ``path`` by a dead writer of the same pid is removed first, never
    emptied: one killed between linking a record and removing its temp file left the
    temp as a second name of the record, which truncating would empty."""
    with suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _turn(path: str) -> Iterator[None]:
    """Take turns with this process's other threads writing ``path`` (one temp name each)."""
    with _turns_guard:
        lock = _turns.setdefault(path, threading.Lock())
    with lock:
        yield
