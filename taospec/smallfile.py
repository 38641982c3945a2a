"""Reading a small file whole, up to a size limit.

``handle.read(limit + 1)`` first makes a buffer of ``limit + 1`` bytes (a
fresh 1 MiB mapping for a job file) and then shrinks it, which costs more than
reading a job file of a few hundred bytes. :func:`read_limited` asks for what
the file's size says is there, plus one byte, and reads on only when that
byte came (the file grew, or it has no size: a pipe, a device).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from typing import BinaryIO


def read_limited(handle: BinaryIO, limit: int) -> bytes:
    """All of ``handle`` if it holds at most ``limit`` bytes, else its first ``limit + 1``."""
    size = os.fstat(handle.fileno()).st_size
    data = handle.read(min(size, limit) + 1)
    if len(data) <= size or len(data) > limit:
        return data
    return data + handle.read(limit + 1 - len(data))
