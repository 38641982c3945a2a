"""Job files as a person meets them: changed since the last time taospec saw them.

Every figure that reads a job file measures a file whose bytes differ from
every earlier run, in this suite run or any other: before each run the file is
rewritten as its original text plus one comment line carrying a token unique to
this suite run and a counter. Nothing taospec could have kept from an earlier
run (an answer, a parsed file, a plan) can then stand in for the work.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable
from pathlib import Path

SUITE_TOKEN = uuid.uuid4().hex[:12]


class EditedFile:
    """A file that :meth:`edit` rewrites with a new trailing comment each time."""

    def __init__(self, path: Path, rewrite: Callable[[str, int], str] | None = None) -> None:
        self.path = path
        self.original = path.read_text(encoding="utf-8")
        self.rewrite = rewrite
        self._counter = itertools.count(1)
        self.edits = 0

    def edit(self) -> bytes:
        """Rewrite the file with the next counter; return the bytes now on disk."""
        number = next(self._counter)
        text = self.original if self.rewrite is None else self.rewrite(self.original, number)
        data = f"{text}# bench edit {SUITE_TOKEN}-{number}\n".encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.edits = number
        return data


def edit_all(files: list[EditedFile]) -> None:
    """Edit every file once (the 500 files ``validate`` is given, before each run)."""
    for file in files:
        file.edit()
