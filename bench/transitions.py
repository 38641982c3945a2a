"""Durable transitions per second for one writer, and the floor this disk sets for them.

``python bench/transitions.py ledger STATE N`` opens N records and marks each
RUNNING through the public :class:`taospec.ledger.Ledger` API (2N transitions,
each durable when the call returns) and prints transitions per second.

``python bench/transitions.py floor DIR N`` does, 2N times, exactly the file
work one durable transition needs: take an exclusive ``flock`` on the record's
``.<id>.json.lock`` (as the TAO recorder does), write a temp file and fsync it,
rename it over ``<id>.json``, fsync the folder, release the lock. No writer that
keeps these guarantees can beat it on this disk, so the ledger is judged as a
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


def durable_write(folder: Path, name: str, data: bytes) -> None:
    """One transition's file work: lock, temp file + fsync, rename, folder fsync, unlock."""
    lock = os.open(folder / f".{name}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
        fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)


def floor_rate(folder: Path, count: int) -> float:
    """The same number of transitions as bare durable writes; transitions per second."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for index in range(2 * count):
        durable_write(folder, f"job-{index // 2:06d}.json", RECORD)
    return 2 * count / (time.perf_counter() - started)


if __name__ == "__main__":
    mode, where, number = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rate = ledger_rate(where, number) if mode == "ledger" else floor_rate(where, number)
    print(f"{rate:.1f}")
