"""Tests for taospec.listing: list() stays exact while reading only what changed."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taospec.ledger import Ledger, Record, listing, store
from taospec.ledger.journal import OPEN_MARK
from taospec.ledger.record import ID_RE
from tests.ledgers import IMAGE, open_job


def foreign(ledger: Ledger, job_id: str, submitted_at: str) -> None:
    """A record another TAO tool wrote, with no journal line."""
    data = {
        "schema_version": 1,
        "id": job_id,
        "platform": "slurm",
        "backend_ref": "48213",
        "image": IMAGE,
        "network_arch": "dino",
        "action": "evaluate",
        "results_dir": f"/lustre/results/{job_id}",
        "storage_tier": "A",
        "upload_excludes": [],
        "submitted_at": submitted_at,
        "transitions": [{"ts": submitted_at, "state": "PENDING", "message": "", "source": "agent"}],
        "terminal_state": None,
        "redacted": True,
    }
    (Path(ledger.jobs_dir) / f"{job_id}.json").write_text(json.dumps(data))


def settle(ledger: Ledger) -> None:
    """Date the jobs folder's mtime 10 s back, as if nothing had changed it since."""
    stat = Path(ledger.jobs_dir).stat()
    os.utime(ledger.jobs_dir, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10_000_000_000))


def scans(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every scan of a folder the ledger makes."""
    seen: list[Path] = []
    real = os.listdir

    def counting(path: str) -> list[str]:
        seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(store.os, "listdir", counting)
    return seen


def ids(records: list[Record]) -> list[str]:
    return [r.id for r in records]


def test_a_settled_folder_is_not_scanned_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = [open_job(ledger).id for _ in range(4)]
    settle(ledger)
    assert ids(ledger.list(limit=2)) == made[:1:-1]
    seen = scans(monkeypatch)
    assert ids(ledger.list(limit=2)) == made[:1:-1]
    assert ids(ledger.list()) == made[::-1]
    assert seen == []


def test_a_folder_changed_within_the_settling_time_is_scanned_every_time(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = [open_job(ledger).id for _ in range(3)]
    assert ids(ledger.list()) == made[::-1]
    seen = scans(monkeypatch)
    assert ids(ledger.list()) == made[::-1]
    assert ids(ledger.list()) == made[::-1]
    assert seen == [Path(ledger.jobs_dir), Path(ledger.jobs_dir)]
    assert "jobs" not in json.loads((Path(ledger.root) / listing.STATE_FILE).read_text())


def test_a_record_written_after_the_count_is_listed(ledger: Ledger) -> None:
    made = [open_job(ledger).id for _ in range(3)]
    settle(ledger)
    assert ids(ledger.list()) == made[::-1]
    foreign(ledger, "late-1", "2999-01-01T00:00:00Z")
    foreign(ledger, "early-1", "2000-01-01T00:00:00.5Z")
    assert ids(ledger.list()) == ["late-1", *made[::-1], "early-1"]
    assert ids(ledger.list(limit=1)) == ["late-1"]
    settle(ledger)
    assert ids(ledger.list()) == ["late-1", *made[::-1], "early-1"]
    assert ids(ledger.list(state="RUNNING")) == []


def test_remembered_foreign_records_are_merged_by_time_and_read_fresh(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = open_job(ledger).id
    foreign(ledger, "a-1", "2000-01-01T00:00:00.5Z")
    foreign(ledger, "b-1", "2000-01-01T00:00:00Z")
    foreign(ledger, "c-1", "2999-01-01T00:00:00Z")
    settle(ledger)
    assert ids(ledger.list()) == ["c-1", made, "a-1", "b-1"]
    seen = scans(monkeypatch)
    assert ids(ledger.list()) == ["c-1", made, "a-1", "b-1"]
    assert ids(ledger.list(limit=2)) == ["c-1", made]
    assert seen == []


def test_a_foreign_record_journalled_later_is_listed_once(ledger: Ledger) -> None:
    made = open_job(ledger).id
    foreign(ledger, "f-1", "2000-01-01T00:00:00Z")
    foreign(ledger, "f-2", "2000-01-02T00:00:00Z")
    settle(ledger)
    assert ids(ledger.list()) == [made, "f-2", "f-1"]
    event = {"ts": "2000-01-01T00:00:00Z", "id": "f-1", "event": "open", "state": "PENDING"}
    with Path(ledger.journal_path).open("ab") as journal:
        journal.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
    listed = ids(ledger.list())
    assert sorted(listed) == sorted([made, "f-1", "f-2"])


def test_a_replaced_journal_is_counted_from_its_start(ledger: Ledger) -> None:
    made = [open_job(ledger).id for _ in range(3)]
    settle(ledger)
    assert ids(ledger.list()) == made[::-1]
    lines = Path(ledger.journal_path).read_bytes().splitlines(keepends=True)
    replacement = Path(ledger.journal_path).with_name("new.jsonl")
    replacement.write_bytes(lines[0])
    replacement.replace(ledger.journal_path)
    assert ids(ledger.list()) == made[::-1]
    settle(ledger)
    assert ids(ledger.list()) == made[::-1]
    Path(ledger.journal_path).write_bytes(b"x" * len(b"".join(lines)) + b"\n")
    assert ids(ledger.list()) == made[::-1]


def test_a_damaged_state_file_means_counting_again(ledger: Ledger) -> None:
    made = [open_job(ledger).id for _ in range(2)]
    settle(ledger)
    assert ids(ledger.list()) == made[::-1]
    state = Path(ledger.root) / listing.STATE_FILE
    for text in ("", "{", "[]", '{"format": 1, "jobs": {"records": "2"}}', "\0" * 10):
        state.write_text(text)
        assert ids(ledger.list()) == made[::-1]
    data = json.loads(state.read_text())
    data["jobs"]["records"] = 0
    data["jobs"]["foreign"] = [[1, 2]]
    state.write_text(json.dumps(data))
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    assert ids(ledger.list()) == ["f-1", *made[::-1]]


def test_counting_resumes_exactly_after_any_appends(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.jsonl"
    opened = b'{"id":"a","event":"open"}\n'
    moved = b'{"id":"a","event":"transition"}\n'
    pieces = [opened, moved, opened[:7], opened[7:], b"\n", b'{"event":"op', b'en"}\n']
    chooser = random.Random(6)
    journal.write_bytes(b"")
    state = None
    for _ in range(200):
        with journal.open("ab") as out:
            out.write(chooser.choice(pieces))
        opens, state = listing._count_opens(journal, state)
        content = journal.read_bytes()
        complete = content[: content.rfind(b"\n") + 1]
        assert opens == complete.count(OPEN_MARK)
        assert state["offset"] == len(complete)


def test_json_names_that_are_no_record_do_not_hide_a_foreign_one(ledger: Ledger) -> None:
    made = [open_job(ledger).id for _ in range(2)]
    jobs = Path(ledger.jobs_dir)
    for name in (".hidden.json", "-dash.json", "with space.json", ".json"):
        (jobs / name).write_text("{}")
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    assert ids(ledger.list()) == ["f-1", *made[::-1]]
    settle(ledger)
    assert ids(ledger.list()) == ["f-1", *made[::-1]]


NAME_PARTS = st.sampled_from(["a", "B7", ".", "-", "_", " ", "json", "tmp", "lock", "\n", "é"])


@given(st.lists(st.lists(NAME_PARTS, min_size=1, max_size=6).map("".join), max_size=30))
def test_a_scan_counts_and_finds_as_a_look_at_each_name_would(names: list[str]) -> None:
    scan = listing.scanned(names)
    records = [n[:-5] for n in names if n.endswith(".json") and ID_RE.fullmatch(n[:-5])]
    assert scan.record_ids() == tuple(records)
    assert scan.records_at_most == sum(n.endswith(".json") for n in names) >= len(records)
    assert scan.temps == tuple(n for n in names if n.startswith(".") and n.endswith(".tmp"))
