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
    for text in ("", "{", "[]", '{"format": 2, "unaccounted": {"sum": "2"}}', "\0" * 10):
        state.write_text(text)
        assert ids(ledger.list()) == made[::-1]
    data = json.loads(state.read_text())
    data["unaccounted"]["foreign"] = [[1, 2]]
    state.write_text(json.dumps(data))
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    assert ids(ledger.list()) == ["f-1", *made[::-1]]
    data = json.loads(state.read_text())
    data["journal"]["opened"] = "0"
    state.write_text(json.dumps(data))
    assert ids(ledger.list()) == ["f-1", *made[::-1]]


def test_summing_resumes_exactly_after_any_appends(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.jsonl"
    opened = b'{"id":"a","event":"open"}\n'
    other = b'{"id":"b-1","event":"open"}\n'
    moved = b'{"id":"a","event":"transition"}\n'
    pieces = [opened, other, moved, opened[:7], opened[7:], b"\n", b'{"event":"op', b'en"}\n']
    chooser = random.Random(6)
    journal.write_bytes(b"")
    state = None
    for _ in range(200):
        with journal.open("ab") as out:
            out.write(chooser.choice(pieces))
        opened_sum, state = listing._open_lines_sum(str(journal), state)
        content = journal.read_bytes()
        complete = content[: content.rfind(b"\n") + 1]
        whole = [json.loads(line) for line in complete.splitlines() if _whole(line)]
        names = [f"{e['id']}.json" for e in whole if e.get("event") == "open" and "id" in e]
        assert opened_sum == listing.names_sum(names)
        assert state["offset"] == len(complete)


def _whole(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def test_a_record_removed_by_hand_does_not_hide_one_another_writer_adds(ledger: Ledger) -> None:
    made = [open_job(ledger).id for _ in range(3)]
    settle(ledger)
    assert ids(ledger.list()) == made[::-1]
    (Path(ledger.jobs_dir) / f"{made[0]}.json").unlink()
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    assert ids(ledger.list()) == ["f-1", made[2], made[1]]
    settle(ledger)
    assert ids(ledger.list()) == ["f-1", made[2], made[1]]
    (Path(ledger.jobs_dir) / f"{made[1]}.json").unlink()
    foreign(ledger, "f-2", "2998-01-01T00:00:00Z")
    settle(ledger)
    assert ids(ledger.list()) == ["f-1", "f-2", made[2]]


def test_a_record_whose_open_line_was_torn_is_listed(ledger: Ledger) -> None:
    made = open_job(ledger).id
    settle(ledger)
    assert ids(ledger.list()) == [made]
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    event = {"ts": "2999-01-01T00:00:00Z", "id": "f-1", "event": "open", "state": "PENDING"}
    torn = json.dumps(event, separators=(",", ":")).encode()[:-8]
    with Path(ledger.journal_path).open("ab") as journal:
        journal.write(torn + b"\n")  # a crash cut it; the next append fenced it off
    assert ids(ledger.list()) == ["f-1", made]


def test_a_second_open_line_does_not_hide_a_record_another_writer_adds(ledger: Ledger) -> None:
    made = open_job(ledger).id
    settle(ledger)
    assert ids(ledger.list()) == [made]
    line = next(
        line
        for line in Path(ledger.journal_path).read_bytes().splitlines(keepends=True)
        if OPEN_MARK in line
    )
    with Path(ledger.journal_path).open("ab") as journal:
        journal.write(line)
    foreign(ledger, "f-1", "2999-01-01T00:00:00Z")
    assert ids(ledger.list()) == ["f-1", made]


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
def test_a_scan_sums_and_finds_as_a_look_at_each_name_would(names: list[str]) -> None:
    scan = listing.scanned(names)
    records = [n[:-5] for n in names if n.endswith(".json") and ID_RE.fullmatch(n[:-5])]
    assert scan.record_ids() == tuple(records)
    assert scan.names_sum == listing.names_sum([n for n in names if n.endswith(".json")])
    assert scan.names_sum == listing.names_sum(sorted(n for n in names if n.endswith(".json")))
    assert scan.temps == tuple(n for n in names if n.startswith(".") and n.endswith(".tmp"))


@given(st.lists(st.lists(NAME_PARTS, min_size=1, max_size=6).map("".join), max_size=30), st.data())
def test_one_name_more_or_fewer_changes_the_sum(names: list[str], data: st.DataObject) -> None:
    extra = data.draw(st.text(min_size=1).filter(lambda n: "\0" not in n))
    total = listing.names_sum(names)
    assert listing.names_sum([*names, extra]) != total
    if names:
        dropped = data.draw(st.integers(0, len(names) - 1))
        assert listing.names_sum(names[:dropped] + names[dropped + 1 :]) != total
