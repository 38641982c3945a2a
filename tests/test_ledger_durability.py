"""The record is the durable copy; the journal is an index a power cut may shorten.

These tests cut the journal the way a power cut can (its last lines gone, or
a line torn) and check that no record and no transition is lost, and they
watch which files an open and a mark fsync before returning.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from taospec import durable
from taospec.ledger import Ledger, Record
from tests.ledgers import open_job


def settle(ledger: Ledger) -> None:
    """Age the jobs folder's mtime so the listing cache may remember a scan of it."""
    stat = Path(ledger.jobs_dir).stat()
    os.utime(ledger.jobs_dir, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10_000_000_000))


def cut_journal(ledger: Ledger, lines: int, torn: bytes = b"") -> None:
    """Drop the journal's last ``lines`` lines, then leave ``torn`` as a partial line."""
    data = Path(ledger.journal_path).read_bytes()
    kept = data.splitlines(keepends=True)[:-lines] if lines else data.splitlines(keepends=True)
    Path(ledger.journal_path).write_bytes(b"".join(kept) + torn)


def states(records: list[Record]) -> list[tuple[str, str, int]]:
    return [(r.id, r.state, len(r.transitions)) for r in records]


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The real path of every descriptor the ledger fsyncs, in order (fsync still runs).

    The path is read from /proc/self/fd, which every Linux has.
    """
    paths: list[str] = []
    real_fsync = os.fsync

    def watching(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", watching)
    return paths


def test_open_and_mark_fsync_the_record_and_its_folder_but_not_the_journal(
    ledger: Ledger, fsynced: list[str]
) -> None:
    first = open_job(ledger)  # creates the folders and the journal
    fsynced.clear()
    record = open_job(ledger)
    jobs = str(Path(ledger.jobs_dir).resolve())
    temp_prefix = f"{jobs}/.{record.id}.json."
    assert len(fsynced) == 2
    assert fsynced[0].startswith(temp_prefix)
    assert fsynced[1] == jobs

    fsynced.clear()
    ledger.mark(first.id, "RUNNING", message="launched")
    assert len(fsynced) == 2
    assert fsynced[0].startswith(f"{jobs}/.{first.id}.json.")
    assert fsynced[1] == jobs
    assert str(Path(ledger.journal_path).resolve()) not in fsynced


def test_the_journal_creation_is_made_durable(ledger: Ledger, fsynced: list[str]) -> None:
    open_job(ledger)
    assert str(Path(ledger.root).resolve()) in fsynced
    assert str(Path(ledger.journal_path).resolve()) not in fsynced


def test_a_record_and_its_transitions_survive_losing_the_whole_journal(ledger: Ledger) -> None:
    record = open_job(ledger)
    marked = ledger.mark(record.id, "RUNNING", message="launched", backend_ref="pid:7")
    done = ledger.mark(record.id, "COMPLETE", message="exit 0")
    Path(ledger.journal_path).unlink()
    assert ledger.get(record.id) == done
    assert done.transitions[:2] == marked.transitions
    assert [t.state for t in done.transitions] == ["PENDING", "RUNNING", "COMPLETE"]
    assert ledger.list() == [done]


@pytest.mark.parametrize("torn", [b"", b'{"ts":"2025-01-01T00:00', b"\0" * 40])
def test_a_journal_missing_its_last_lines_still_lists_every_record(
    ledger: Ledger, torn: bytes
) -> None:
    opened = [open_job(ledger) for _ in range(6)]
    for record in opened[::2]:
        ledger.mark(record.id, "RUNNING", message="launched")
    settle(ledger)
    full = ledger.list()  # the listing cache now remembers the whole journal
    assert [r.id for r in full] == [r.id for r in opened[::-1]]

    cut_journal(ledger, 5, torn)  # two opens and three transitions gone
    assert ledger.list() == full
    assert ledger.list(limit=3) == full[:3]
    assert ledger.list(state="RUNNING") == [r for r in full if r.state == "RUNNING"]
    for record in full:
        assert ledger.get(record.id) == record

    # Writing goes on: the torn fragment is fenced off and nothing is listed twice.
    later = open_job(ledger)
    ledger.mark(opened[1].id, "ERROR", message="lost", err_class="ERR_INFRA")
    listed = ledger.list()
    assert [r.id for r in listed] == [later.id, *(r.id for r in full)]
    assert states(listed) == states([ledger.get(r.id) for r in listed])
    assert ledger.get(opened[1].id).state == "ERROR"
    assert [e["event"] for e in ledger.journal(later.id)] == ["open"]


def test_a_shortened_journal_that_grew_again_is_counted_afresh(ledger: Ledger) -> None:
    opened = [open_job(ledger) for _ in range(4)]
    settle(ledger)
    assert [r.id for r in ledger.list()] == [r.id for r in opened[::-1]]
    cut_journal(ledger, 2)
    more = [open_job(ledger) for _ in range(3)]  # the journal is longer than before the cut
    settle(ledger)
    expected = [r.id for r in (*opened, *more)][::-1]
    assert [r.id for r in ledger.list()] == expected
    assert [r.id for r in ledger.list()] == expected  # and again, from the cache
