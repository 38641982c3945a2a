"""Records and transitions are frozen, slotted dataclasses: equal by fields, hashable."""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import pytest

from taospec.ledger import Record, Transition


def record(**changes: object) -> Record:
    base = Record(
        id="dino-train-0a1b2c",
        platform="local",
        backend_ref=None,
        image="img",
        network_arch="dino",
        action="train",
        results_dir="/r/dino-train-0a1b2c",
        storage_tier="A",
        upload_excludes=("*.tmp",),
        submitted_at="2025-01-01T00:00:00.000000Z",
        transitions=(Transition("2025-01-01T00:00:00.000000Z", "PENDING", "opened", "agent"),),
        terminal_state=None,
    )
    return replace(base, **changes)


def test_equal_by_fields_hashable_and_frozen() -> None:
    assert record() == record()
    assert record() != record(err_class="ERR_PROGRAM")
    assert hash(record()) == hash(record())
    assert record() != Transition("t", "PENDING", "", "agent")
    with pytest.raises(AttributeError):
        record().id = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del record().id
    with pytest.raises(TypeError):
        replace(record(), colour="red")


def test_shown_copied_and_pickled_whole() -> None:
    value = record(terminal_state="COMPLETE", terminal_write_by="poller")
    assert repr(value).startswith("Record(id='dino-train-0a1b2c', platform='local', ")
    assert repr(value).endswith("parent_job=None, terminal_write_by='poller')")
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(value)) == value
    assert replace(record(), retry_of="x").retry_of == "x"
    assert Transition(ts="a", state="RUNNING", message="m", source="agent").to_json() == {
        "ts": "a",
        "state": "RUNNING",
        "message": "m",
        "source": "agent",
    }
