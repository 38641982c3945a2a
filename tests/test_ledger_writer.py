"""What a writer may skip, and what it must still see.

A ledger remembers the bytes it last wrote for a record and does not parse
them again while the file still holds exactly them; anything else in the
file (another writer's mark, a hand edit, damage) is read and validated as
ever. Marking an id with no record raises and leaves no record or sidecar
for it, only, at most, one of the shared lock stripes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taospec.ledger import Ledger, LedgerCorrupt, Record, UnknownJob
from tests.ledgers import open_job


def record_file(ledger: Ledger, job_id: str) -> Path:
    return ledger.jobs_dir / f"{job_id}.json"


def test_what_a_writer_remembers_is_what_a_fresh_reader_parses(ledger: Ledger) -> None:
    record = open_job(ledger, upload_excludes=["*.ckpt"], retry_of="earlier-1")
    assert ledger.get(record.id) == Ledger(ledger.root).get(record.id) == record
    marked = ledger.mark(record.id, "RUNNING", message="launched", backend_ref="pid:7")
    done = ledger.mark(record.id, "ERROR", message="exit 1", err_class="ERR_PROGRAM")
    assert ledger.get(record.id) == Ledger(ledger.root).get(record.id) == done
    assert done.transitions[: len(marked.transitions)] == marked.transitions


def test_another_writers_mark_is_read_not_remembered(ledger: Ledger) -> None:
    record = open_job(ledger)
    other = Ledger(ledger.root)  # another process, as far as the files go
    other.mark(record.id, "RUNNING", message="from the poller", source="poller")
    marked = ledger.mark(record.id, "COMPLETE", message="exit 0")
    assert [(t.state, t.message) for t in marked.transitions] == [
        ("PENDING", "opened"),
        ("RUNNING", "from the poller"),
        ("COMPLETE", "exit 0"),
    ]
    assert Ledger(ledger.root).get(record.id) == marked


def test_a_hand_edit_is_read(ledger: Ledger) -> None:
    record = open_job(ledger)
    path = record_file(ledger, record.id)
    data = json.loads(path.read_bytes())
    data["backend_ref"] = "edited-by-hand"
    path.write_text(json.dumps(data))
    assert ledger.get(record.id).backend_ref == "edited-by-hand"
    assert ledger.mark(record.id, "RUNNING").backend_ref == "edited-by-hand"


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-2],
        lambda raw: raw.replace(b'"PENDING"', b'"LOST"'),
        lambda raw: raw.replace(b'"redacted": true', b'"redacted": false'),
        lambda raw: raw + b" ",  # the same record, but not the bytes written
    ],
)
def test_damage_after_a_write_is_still_caught(ledger: Ledger, damage: object) -> None:
    assert callable(damage)
    record = open_job(ledger)
    path = record_file(ledger, record.id)
    raw = path.read_bytes()
    path.write_bytes(damage(raw))
    try:
        reread = json.loads(path.read_bytes())
        Record.from_json(reread)
    except (ValueError, LedgerCorrupt):
        with pytest.raises(LedgerCorrupt, match=record.id):
            ledger.mark(record.id, "RUNNING")
    else:
        assert ledger.mark(record.id, "RUNNING").transitions[:1] == record.transitions


def test_a_record_rewritten_with_the_same_bytes_is_the_same_record(ledger: Ledger) -> None:
    record = open_job(ledger)
    path = record_file(ledger, record.id)
    raw = path.read_bytes()
    path.unlink()
    path.write_bytes(raw)  # another file, the same bytes: the same record
    assert ledger.get(record.id) == record
    assert len(ledger.mark(record.id, "RUNNING").transitions) == 2


def test_a_ledger_remembers_a_bounded_number_of_records(ledger: Ledger) -> None:
    from taospec import ledger as ledger_module

    ids = [open_job(ledger).id for _ in range(ledger_module._WRITTEN_KEPT + 5)]
    assert len(ledger._written) == ledger_module._WRITTEN_KEPT
    assert ids[0] not in ledger._written
    assert ids[-1] in ledger._written
    assert ledger.get(ids[0]) == Ledger(ledger.root).get(ids[0])


def test_a_big_record_is_not_remembered(ledger: Ledger) -> None:
    from taospec import ledger as ledger_module

    record = open_job(ledger)
    big = ledger.mark(record.id, "RUNNING", message="x" * ledger_module._WRITTEN_SIZE)
    assert record.id not in ledger._written
    assert ledger.get(record.id) == big
    assert len(ledger.mark(record.id, "COMPLETE").transitions) == 3


def test_marking_an_unknown_job_creates_no_record_or_sidecar(ledger: Ledger) -> None:
    open_job(ledger)
    before = sorted(p.name for p in ledger.jobs_dir.iterdir())
    with pytest.raises(UnknownJob):
        ledger.mark("nope-1", "RUNNING")
    with pytest.raises(UnknownJob):
        ledger.update_sidecar("nope-1", x=1)
    assert sorted(p.name for p in ledger.jobs_dir.iterdir()) == before
    stripes = {f"{n:02x}" for n in range(64)}
    assert {p.name for p in (ledger.jobs_dir / ".locks").iterdir()} <= stripes


def test_marking_in_a_state_root_with_no_jobs_folder_makes_nothing(ledger: Ledger) -> None:
    with pytest.raises(UnknownJob):
        ledger.mark("nope-1", "RUNNING")
    with pytest.raises(UnknownJob):
        ledger.update_sidecar("nope-1", x=1)
    assert not ledger.root.exists()


def test_a_record_another_tool_wrote_can_be_marked(ledger: Ledger) -> None:
    record = open_job(ledger)
    foreign = json.loads(record_file(ledger, record.id).read_bytes())
    foreign["id"] = "foreign-1"
    record_file(ledger, "foreign-1").write_text(json.dumps(foreign))
    marked = ledger.mark("foreign-1", "RUNNING", message="picked up")
    assert [t.state for t in marked.transitions] == ["PENDING", "RUNNING"]
    ledger.update_sidecar("foreign-1", note="seen")
    assert ledger.sidecar("foreign-1") == {"note": "seen"}
    assert not (ledger.jobs_dir / ".foreign-1.lock").exists()


def test_a_removed_record_is_not_resurrected(ledger: Ledger) -> None:
    record = open_job(ledger)
    record_file(ledger, record.id).unlink()
    with pytest.raises(UnknownJob):
        ledger.mark(record.id, "RUNNING")
    with pytest.raises(UnknownJob):
        ledger.update_sidecar(record.id, note="late")
    assert not record_file(ledger, record.id).exists()
    assert not (ledger.jobs_dir / f"{record.id}.taospec").exists()
