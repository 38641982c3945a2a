"""Durable transitions per second for one writer, and the floor this disk sets for them.

``python bench/transitions.py ledger STATE N`` opens N records and marks each
RUNNING through the public :class:`taospec.ledger.Ledger` API (2N transitions,
each durable when the call returns) and prints transitions per second.

``python bench/transitions.py floor DIR N`` does, for N records, exactly the file
work the TAO recorder's protocol needs for an open and a mark. The open reserves
``<id>.json`` with ``O_CREAT|O_EXCL``, writes a temp file and fsyncs it, renames it
over the record and fsyncs the folder; the mark does the same write under an
exclusive ``flock`` on the record's ``.<id>.json.lock``. No writer that keeps the
recorder's guarantees can beat it on this disk, so the ledger is judged as a
share of it, measured in the same run.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from taospec.ledger import Ledger

RECORD = b'{"id": "x", "transitions": []}\n' * 25


def ledger_rate(root: Path, count: int) -> float:
    """Open ``count`` records and mark each RUNNING; return transitions per second."""
    ledger = Ledger(root)
    started = time.perf_counter()
    for _ in range(count):
        record = ledger.open(
            platform="local",
            image="taospec-test/busybox:1",
            network_arch="hello",
            action="greet",
            storage_tier="A",
            results_root="/tmp/taospec-results",
        )
        ledger.mark(record.id, "RUNNING", message="launched", backend_ref="pid:1")
    return 2 * count / (time.perf_counter() - started)


def replace_durably(folder: Path, name: str, data: bytes) -> None:
    """Temp file + fsync, rename over ``name``, folder fsync."""
    temp = folder / f".{name}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    temp.replace(folder / name)
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def open_write(folder: Path, name: str, data: bytes) -> None:
    """An open's file work: reserve the name exclusively, then replace it durably."""
    os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    replace_durably(folder, name, data)


def mark_write(folder: Path, name: str, data: bytes) -> None:
    """A mark's file work: under the record's lock file, replace it durably."""
    lock = os.open(folder / f".{name}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        replace_durably(folder, name, data)
        fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)


def floor_rate(folder: Path, count: int) -> float:
    """An open and a mark for each of ``count`` records as bare file work; transitions/s."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for index in range(count):
        name = f"job-{index:06d}.json"
        open_write(folder, name, RECORD)
        mark_write(folder, name, RECORD)
    return 2 * count / (time.perf_counter() - started)


if __name__ == "__main__":
    mode, where, number = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rate = ledger_rate(where, number) if mode == "ledger" else floor_rate(where, number)
    print(f"{rate:.1f}")
