"""The ledger's JSON writers give exactly the bytes :func:`json.dumps` gives.

Records and sidecars on disk must stay byte for byte what they were when
``json.dumps(indent=2)`` wrote them, and journal lines what compact
``json.dumps`` wrote, whatever the strings hold: quotes, backslashes,
control characters, line and paragraph separators, astral characters, lone
surrogates (which neither can encode), huge integers and non-finite floats.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec.ledger import STATES, Ledger, Record, Transition, _encode_json, _journal_text

HOSTILE = st.one_of(
    st.text(),
    st.text(alphabet="\"\\/\b\f\n\r\t\x00\x1f\x7f\u2028\u2029\ufeff\U0001f600é<>&'", max_size=30),
    st.sampled_from(["", " ", "null", "true", '"', "\\", "\\u0000", "\ud800", "\udfff"]),
)
KEYS = st.one_of(
    HOSTILE,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    HOSTILE,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=25,
)


def by_json(data: object) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def outcome(encode: object, data: object) -> tuple[str, object]:
    """The bytes, or the kind of error, an encoder gives for ``data``."""
    assert callable(encode)
    try:
        return "bytes", encode(data)
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        return "error", type(exc)


@settings(max_examples=1000)
@given(VALUES)
def test_any_json_value_is_written_as_json_dumps_writes_it(data: object) -> None:
    assert outcome(_encode_json, data) == outcome(by_json, data)


TEXT = st.text(min_size=1, max_size=40).filter(str.strip)
TRANSITIONS = st.lists(
    st.builds(
        Transition,
        ts=st.just("2025-01-01T00:00:00.000001Z"),
        state=st.sampled_from(STATES),
        message=st.text(max_size=60),
        source=st.sampled_from(["agent", "poller", "backend-hook"]),
    ),
    min_size=1,
    max_size=5,
).map(tuple)


@settings(max_examples=300)
@given(
    record=st.builds(
        Record,
        id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True),
        platform=st.just("docker"),
        backend_ref=st.one_of(st.none(), st.text(max_size=30)),
        image=TEXT,
        network_arch=TEXT,
        action=TEXT,
        results_dir=TEXT,
        storage_tier=st.sampled_from(["A", "B", "C"]),
        upload_excludes=st.lists(st.text(max_size=20), max_size=3).map(tuple),
        submitted_at=st.just("2025-01-01T00:00:00Z"),
        transitions=TRANSITIONS,
        terminal_state=st.sampled_from([None, "COMPLETE", "ERROR", "CANCELED"]),
        err_class=st.sampled_from([None, "ERR_INFRA", "ERR_PROGRAM"]),
        retry_of=st.one_of(st.none(), st.just("earlier-1")),
    )
)
def test_a_record_is_written_as_json_dumps_writes_it(record: Record) -> None:
    assert outcome(_encode_json, record.to_json()) == outcome(by_json, record.to_json())


@pytest.mark.parametrize(
    "data",
    [
        {},
        [],
        {"a": {}},
        {"a": []},
        [[], {}, [[]]],
        {"nested": {"deeper": [1, 2.5, -0.0, 1e300, True, None, "x"]}},
        {3: "int key", 2.5: "float key", True: "bool key", None: "null key"},
        "\u2028\u2029",
        10**100,
    ],
)
def test_edge_shapes(data: object) -> None:
    assert _encode_json(data) == by_json(data)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"x": [math.nan]}, {math.inf: 1}])
def test_non_finite_floats_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        _encode_json(bad)


@pytest.mark.parametrize("bad", [{"x": object()}, {(1, 2): "tuple key"}, {"x": {1, 2}}, b"x"])
def test_what_json_cannot_write_is_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        _encode_json(bad)


def test_files_the_ledger_writes_are_the_json_dumps_bytes(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "state")
    record = ledger.open(
        platform="docker",
        image="nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
        network_arch="dino",
        action="train",
        storage_tier="A",
        results_root='/results/\u00e9t\u00e9 "q" \\ \u2028',
        upload_excludes=["*.ckpt", "é/\t"],
        sidecar={"spec": "jobs/train.yaml", "plan": {"steps": [1, 2.5, None, True]}},
        message='opened "now"\n\ttabbed \U0001f600',
    )
    record = ledger.mark(record.id, "RUNNING", message="launched \x01", backend_ref="pid:1")
    on_disk = (ledger.jobs_dir / f"{record.id}.json").read_bytes()
    assert on_disk == by_json(json.loads(on_disk))
    assert on_disk == by_json(record.to_json())
    sidecar = (ledger.jobs_dir / f"{record.id}.taospec").read_bytes()
    assert sidecar == by_json(ledger.sidecar(record.id))


@settings(max_examples=1000)
@given(st.dictionaries(HOSTILE, HOSTILE, max_size=8))
def test_a_journal_event_is_written_as_compact_json_dumps_writes_it(event: dict[str, str]) -> None:
    assert _journal_text(event) == json.dumps(event, separators=(",", ":")) + "\n"


def test_journal_lines_the_ledger_writes_are_the_json_dumps_text(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "state")
    record = ledger.open(
        platform="docker",
        image="nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
        network_arch='dino \u00e9\t"x"',
        action="train\u2028",
        storage_tier="A",
        results_root="/results",
        sidecar={"target": "t", "fingerprint": {"digest": "abc", "n": [1, 2]}},
    )
    ledger.mark(record.id, "RUNNING", message="\U0001f600 \\ \x00", backend_ref="pid:1")
    for line in ledger.journal_path.read_bytes().splitlines(keepends=True):
        assert line.decode() == json.dumps(json.loads(line), separators=(",", ":")) + "\n"
