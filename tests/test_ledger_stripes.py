"""Records share a fixed set of lock stripes instead of a lock file each.

An id maps to one of 64 files ``jobs/.locks/00`` .. ``3f`` by the CRC-32 of
its id. Records on one stripe take turns; records on different stripes do
not wait for each other; either way no writer loses a transition. These
tests use real processes and real files.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import zlib
from pathlib import Path

from taospec.ledger import Ledger
from tests.ledgers import open_job

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ledger_worker.py")
STRIPES = {f"{n:02x}" for n in range(64)}


def stripe(job_id: str) -> str:
    return f"{zlib.crc32(job_id.encode()) % 64:02x}"


def ids_on(wanted: str, count: int, prefix: str) -> list[str]:
    """``count`` ids named ``<prefix>-<n>`` whose stripe is ``wanted``."""
    found = (f"{prefix}-{n}" for n in range(100_000))
    return [job_id for job_id in found if stripe(job_id) == wanted][:count]


def ids_off(unwanted: str, count: int, prefix: str) -> list[str]:
    """``count`` ids on ``count`` different stripes, none of them ``unwanted``."""
    chosen: dict[str, str] = {}
    for n in range(100_000):
        job_id = f"{prefix}-{n}"
        if stripe(job_id) != unwanted:
            chosen.setdefault(stripe(job_id), job_id)
        if len(chosen) == count:
            break
    return list(chosen.values())


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def marker(
    ledger: Ledger, go: Path, tag: str, count: int, shared: str, own: str
) -> subprocess.Popen[bytes]:
    """A process that waits for ``go``, then marks ``shared`` and ``own`` ``count`` times each."""
    command = [sys.executable, str(WORKER), "mark", str(ledger.root), str(go), tag, str(count)]
    return subprocess.Popen([*command, shared, own], env=worker_env())


def test_an_id_always_names_the_same_stripe(ledger: Ledger) -> None:
    open_job(ledger, job_id="shared-1")
    ledger.mark("shared-1", "RUNNING")
    Ledger(ledger.root).update_sidecar("shared-1", note="x")
    # CRC-32 is fixed by its standard: the name is the same in every process and version.
    assert [p.name for p in (ledger.jobs_dir / ".locks").iterdir()] == ["10"]


def test_records_on_one_stripe_and_on_others_keep_every_transition(
    ledger: Ledger, tmp_path: Path
) -> None:
    workers, count = 16, 15
    first, second = ids_on("00", 2, "shared")
    own = ids_on("00", workers // 2, "own") + ids_off("00", workers // 2, "own")
    assert stripe(first) == stripe(second) == "00"
    assert len({stripe(job_id) for job_id in own}) == 1 + workers // 2
    for job_id in (first, second, *own):
        open_job(ledger, job_id=job_id)
    go = tmp_path / "go"
    procs = [
        marker(ledger, go, f"w{i}", count, first if i % 2 else second, own[i])
        for i in range(workers)
    ]
    time.sleep(0.5)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * workers

    for shared, tags in ((first, range(1, workers, 2)), (second, range(0, workers, 2))):
        messages = [t.message for t in ledger.get(shared).transitions[1:]]
        assert sorted(messages) == sorted(f"w{i} shared {n}" for i in tags for n in range(count))
    for i, job_id in enumerate(own):
        messages = [t.message for t in ledger.get(job_id).transitions[1:]]
        assert messages == [f"w{i} own {n}" for n in range(count)]
    events = [json.loads(line) for line in ledger.journal_path.read_bytes().splitlines()]
    assert sum(e["event"] == "transition" for e in events) == 2 * workers * count


def test_a_held_stripe_stops_only_the_records_on_it(ledger: Ledger, tmp_path: Path) -> None:
    held, same = ids_on("2a", 2, "job")
    (other,) = ids_off("2a", 1, "job")
    for job_id in (held, same, other):
        open_job(ledger, job_id=job_id)
    go = tmp_path / "go"
    go.touch()
    with ledger._locked(held):
        waiting = marker(ledger, go, "same", 1, same, same)
        passing = marker(ledger, go, "other", 1, other, other)
        assert passing.wait(timeout=60) == 0
        time.sleep(0.3)
        assert waiting.poll() is None
        assert len(ledger.get(same).transitions) == 1
    assert waiting.wait(timeout=60) == 0
    assert len(ledger.get(same).transitions) == 3
    assert len(ledger.get(other).transitions) == 3


def test_the_jobs_folder_gains_no_lock_file_per_job(ledger: Ledger) -> None:
    ids = [open_job(ledger, sidecar={"n": n}).id for n in range(200)]
    for job_id in ids:
        ledger.mark(job_id, "RUNNING")
        ledger.update_sidecar(job_id, seen=True)
    names = {p.name for p in ledger.jobs_dir.iterdir()}
    expected = {f"{job_id}{suffix}" for job_id in ids for suffix in (".json", ".taospec")}
    assert names == {".locks", *expected}
    locks = ledger.jobs_dir / ".locks"
    assert stat.S_IMODE(locks.stat().st_mode) & 0o077 == 0
    assert {p.name for p in locks.iterdir()} <= STRIPES
    for lock in locks.iterdir():
        assert lock.read_bytes() == b""
        assert stat.S_IMODE(lock.stat().st_mode) & 0o077 == 0


def test_lock_files_an_older_version_left_are_ignored(ledger: Ledger) -> None:
    record = open_job(ledger)
    old = ledger.jobs_dir / f".{record.id}.lock"
    old.write_bytes(b"")
    ledger.mark(record.id, "RUNNING")
    assert [r.id for r in ledger.list()] == [record.id]
    assert [r.id for r in Ledger(ledger.root).list()] == [record.id]
    assert old.read_bytes() == b""
    assert {p.name for p in ledger.jobs_dir.iterdir()} == {
        ".locks",
        old.name,
        f"{record.id}.json",
    }
