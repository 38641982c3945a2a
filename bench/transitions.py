"""Durable transitions per second for one writer, and the disk's floor for the same work.

``python bench/transitions.py ledger STATE N`` opens N records and marks each
RUNNING through :class:`taospec.ledger.Ledger` (2N transitions, every record
write fsynced as the ledger always does) and prints transitions per second.

``python bench/transitions.py floor DIR N`` does only the file work a durable
transition cannot do without, 2N times: write a small temp file and fsync it,
rename it over a record, fsync the folder, and append a journal line with one
``write()`` (not fsynced: the journal is an index of what the records hold, see
:mod:`taospec.ledger`). That is the most any writer keeping these guarantees
can reach here, and it shows what the fsync latency of this disk allows.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

RECORD = b'{"id": "x", "transitions": []}\n' * 25
LINE = b'{"ts":"2025-01-01T00:00:00.000000Z","id":"x","event":"transition","state":"RUNNING"}\n'


def ledger_rate(root: Path, count: int) -> float:
    """Open ``count`` records and mark each RUNNING; return transitions per second."""
    from taospec.ledger import Ledger

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


def floor_rate(folder: Path, count: int) -> float:
    """The same number of transitions as bare temp+fsync+rename+dir fsync+journal write."""
    folder.mkdir(parents=True, exist_ok=True)
    journal = os.open(folder / "journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    started = time.perf_counter()
    for index in range(2 * count):
        temp = folder / f".{index}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, RECORD)
        os.fsync(fd)
        os.close(fd)
        temp.replace(folder / f"{index // 2}.json")
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(directory)
        os.close(directory)
        os.write(journal, LINE)
    elapsed = time.perf_counter() - started
    os.close(journal)
    return 2 * count / elapsed


if __name__ == "__main__":
    mode, where, number = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rate = ledger_rate(where, number) if mode == "ledger" else floor_rate(where, number)
    print(f"{rate:.1f}")
