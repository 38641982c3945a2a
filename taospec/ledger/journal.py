"""``ledger.jsonl``: one line per open and per transition, in the order they happened.

The journal is taospec's index of what the records already hold (the TAO
recorder does not write it). It is not fsynced: the record it indexes is, and a
power cut that shortens the journal by its last lines costs a rescan of the jobs
folder, never a record or a transition (see :mod:`taospec.ledger.store`).

Each event is one compact JSON line under 4 KiB, appended with a single
``write()`` on an ``O_APPEND`` descriptor while holding the journal's ``flock``:
concurrent appends never interleave, a killed writer leaves its line whole or
absent, and a line torn by a machine crash is skipped by readers and fenced off
(preceded by a newline) by the next append.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping

from taospec.durable import WriteFailed, fsync_folder
from taospec.ledger.record import ID_RE

OPEN_MARK = b'"event":"open"'
"""What every ``open`` line holds, as :func:`encode_line` writes it (and no other line)."""

NAME = "ledger.jsonl"
MAX_LINE = 4094
"""Most bytes in one line, newline included; with a fence byte, each append is under 4 KiB."""
_FIXED_KEYS = frozenset({"ts", "id", "event", "state"})
_TRUNCATED = "...[truncated]"
_BLOCK = 64 * 1024


def append(path: str, event: Mapping[str, str]) -> None:
    """Append ``event`` as one line; the journal's creation (only) is made durable."""
    line = encode_line(event)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            created = _append_fenced(fd, line)
        finally:
            os.close(fd)
        if created:
            fsync_folder(os.path.dirname(path))
    except OSError as exc:
        raise WriteFailed(path, exc) from None


def _append_fenced(fd: int, line: bytes) -> bool:
    """Write ``line`` at the end in one ``write()``; return whether the journal was empty.

    Under the ``flock`` no other appender is mid-line, so a last byte that is not
    a newline is a fragment of a writer that died, and this line fences it off.
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        if written != len(line):
            os.ftruncate(fd, size)  # a short write (disk full): leave no fragment
            raise OSError(28, os.strerror(28))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return size == 0


def encode_line(event: Mapping[str, str]) -> bytes:
    """One compact JSON line under :data:`MAX_LINE` bytes; the longest free text is cut."""
    fitted = dict(event)
    while True:
        line = (json.dumps(fitted, separators=(",", ":")) + "\n").encode()
        if len(line) <= MAX_LINE:
            return line
        key = max(_trimmable(fitted), key=lambda k: len(fitted[k]))
        text = fitted[key]
        fitted[key] = text[: max(16, len(text) // 2)] + _TRUNCATED


def _trimmable(event: Mapping[str, str]) -> list[str]:
    return [key for key, value in event.items() if key not in _FIXED_KEYS and len(value) > 32]


def parse_line(line: bytes) -> dict[str, object] | None:
    """One event; a blank or torn line gives ``None``."""
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def events(path: str) -> Iterator[dict[str, object]]:
    """Every readable event, oldest first."""
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return
    with stream:
        for line in stream:
            entry = parse_line(line)
            if entry is not None:
                yield entry


def lines_backwards(path: str) -> Iterator[bytes]:
    """The journal's lines from last to first, read in fixed-size blocks."""
    with open(path, "rb") as stream:
        position = stream.seek(0, os.SEEK_END)
        head = b""
        while position > 0:
            step = min(_BLOCK, position)
            position -= step
            stream.seek(position)
            lines = (stream.read(step) + head).split(b"\n")
            head = lines[0]
            yield from reversed(lines[1:])
        yield head


def opened_ids(lines: Iterable[bytes]) -> Iterator[str]:
    """The id of each open line of ``lines`` that reads whole; other lines are not parsed."""
    for line in lines:
        if OPEN_MARK in line:
            entry = parse_line(line)
            job_id = None if entry is None else opened_id(entry)
            if job_id is not None:
                yield job_id


def opened_id(entry: Mapping[str, object]) -> str | None:
    """The id of an ``open`` event, or ``None`` for anything else."""
    job_id = entry.get("id")
    if entry.get("event") != "open" or not isinstance(job_id, str):
        return None
    return job_id if ID_RE.fullmatch(job_id) else None
