"""What a writer may skip, and what it must still see.

Marking takes the record's lock file, creating one only for a record that
exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taospec.ledger import Ledger, Record, UnknownJob

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "state")


def open_job(ledger: Ledger, **overrides: object) -> Record:
    fields: dict[str, object] = {
        "platform": "docker",
        "image": IMAGE,
        "network_arch": "dino",
        "action": "train",
        "storage_tier": "A",
        "results_root": "/results",
    }
    fields.update(overrides)
    return ledger.open(**fields)  # type: ignore[arg-type]


def record_file(ledger: Ledger, job_id: str) -> Path:
    return ledger.jobs_dir / f"{job_id}.json"


def test_marking_an_unknown_job_leaves_no_lock_file(ledger: Ledger) -> None:
    open_job(ledger)
    before = sorted(p.name for p in ledger.jobs_dir.iterdir())
    with pytest.raises(UnknownJob):
        ledger.mark("nope-1", "RUNNING")
    with pytest.raises(UnknownJob):
        ledger.update_sidecar("nope-1", x=1)
    assert sorted(p.name for p in ledger.jobs_dir.iterdir()) == before


def test_a_record_another_tool_wrote_gets_a_lock_file_when_marked(ledger: Ledger) -> None:
    record = open_job(ledger)
    foreign = json.loads(record_file(ledger, record.id).read_bytes())
    foreign["id"] = "foreign-1"
    record_file(ledger, "foreign-1").write_text(json.dumps(foreign))
    assert not (ledger.jobs_dir / ".foreign-1.lock").exists()
    marked = ledger.mark("foreign-1", "RUNNING", message="picked up")
    assert (ledger.jobs_dir / ".foreign-1.lock").exists()
    assert [t.state for t in marked.transitions] == ["PENDING", "RUNNING"]
    ledger.update_sidecar("foreign-1", note="seen")
    assert ledger.sidecar("foreign-1") == {"note": "seen"}


def test_a_lock_file_left_by_a_removed_record_does_not_resurrect_it(ledger: Ledger) -> None:
    record = open_job(ledger)
    record_file(ledger, record.id).unlink()
    assert (ledger.jobs_dir / f".{record.id}.lock").exists()
    with pytest.raises(UnknownJob):
        ledger.mark(record.id, "RUNNING")
    assert not record_file(ledger, record.id).exists()
