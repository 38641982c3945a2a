"""Tests for taospec.ledger: real files, real processes, real SIGKILLs."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath

import hypothesis
import pytest
from hypothesis import settings
from hypothesis import strategies as st

from taospec import durable, jobids, lint
from taospec.errors import InvalidInput
from taospec.ledger import (
    SOURCES,
    Ledger,
    LedgerCorrupt,
    TerminalStateError,
    UnknownJob,
    store,
)
from taospec.ledger import record as record_module
from taospec.ledger.record import Mark
from taospec.states import STATES, TERMINAL
from tests.ledgers import IMAGE, open_job

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ledger_worker.py")
TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00")
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RECORDER_KEYS = [  # a new record's keys, in the order the recorder writes them
    "schema_version",
    "id",
    "platform",
    "backend_ref",
    "image",
    "network_arch",
    "action",
    "results_dir",
    "storage_tier",
    "upload_excludes",
    "submitted_at",
    "transitions",
    "terminal_state",
    "redacted",
]
REQUIRED = set(RECORDER_KEYS)


def on_disk(ledger: Ledger, job_id: str) -> dict[str, object]:
    return json.loads((Path(ledger.jobs_dir) / f"{job_id}.json").read_text())


def journal_lines(ledger: Ledger) -> list[bytes]:
    return Path(ledger.journal_path).read_bytes().splitlines()


def hand_written(job_id: str, submitted_at: str, **extra: object) -> dict[str, object]:
    """A record as another TAO tool would write it."""
    record: dict[str, object] = {
        "schema_version": 1,
        "id": job_id,
        "platform": "slurm",
        "backend_ref": "48213",
        "image": IMAGE,
        "network_arch": "dino",
        "action": "evaluate",
        "results_dir": f"/lustre/results/{job_id}",
        "storage_tier": "A",
        "upload_excludes": ["*.tmp"],
        "submitted_at": submitted_at,
        "transitions": [
            {"ts": submitted_at, "state": "PENDING", "message": "", "source": "agent"},
            {"ts": submitted_at, "state": "RUNNING", "message": "R", "source": "poller"},
        ],
        "terminal_state": None,
        "redacted": True,
    }
    record.update(extra)
    return record


def write_foreign(ledger: Ledger, data: dict[str, object]) -> Path:
    Path(ledger.jobs_dir).mkdir(parents=True, exist_ok=True)
    path = Path(ledger.jobs_dir) / f"{data['id']}.json"
    path.write_text(json.dumps(data))
    return path


def assert_transition_shape(item: object) -> None:
    assert isinstance(item, dict)
    assert set(item) == {"ts", "state", "message", "source"}
    assert TS_RE.fullmatch(item["ts"])
    assert item["state"] in STATES
    assert isinstance(item["message"], str)
    assert item["source"] in SOURCES


# -- the record shape --------------------------------------------------------


def test_opened_record_has_exactly_the_tao_shape(ledger: Ledger) -> None:
    record = open_job(ledger, upload_excludes=["*.ckpt"])
    data = on_disk(ledger, record.id)
    assert set(data) == REQUIRED
    assert data["schema_version"] == 1
    assert type(data["schema_version"]) is int
    assert ID_RE.fullmatch(str(data["id"]))
    assert data["platform"] == "docker"
    assert data["backend_ref"] is None
    assert data["image"] == IMAGE
    assert (data["network_arch"], data["action"]) == ("visual_changenet", "train")
    assert data["results_dir"] == f"/results/{record.id}"
    assert data["storage_tier"] == "A"
    assert data["upload_excludes"] == ["*.ckpt"]
    assert TS_RE.fullmatch(str(data["submitted_at"]))
    transitions = data["transitions"]
    assert isinstance(transitions, list)
    assert len(transitions) == 1
    assert_transition_shape(transitions[0])
    assert transitions[0]["state"] == "PENDING"
    assert transitions[0]["source"] == "agent"
    assert data["terminal_state"] is None
    assert data["redacted"] is True
    assert record.to_json() == data
    assert record.state == "PENDING"


# Field values an open or a mark may carry: plain ones, and ones redaction rewrites.
TEXTS = st.one_of(
    st.sampled_from(
        [
            "",
            record_module.OPENED_MESSAGE,
            "launched",
            "exit 3 (killed)",
            "é launched",
            "NGC_KEY=abc123 rejected",
            "bearer abc12345",
            "nvapi-AbCdEf0123456789AbCdEf0123",
            "s3://user:hunter2@bucket/run",
            "<redacted>",
            "Zq9vXr7TtW3pLm5K",
        ]
    ),
    st.text(max_size=30),
)
NAMES = st.one_of(
    st.none(), st.sampled_from(["p-1", "ghp_AbCdEfGhIjKlMnOpQrSt0123"]), st.text(max_size=8)
)


def _written(ledger: Ledger, job_id: str) -> record_module.Record:
    """The record its file holds, checked to be in the recorder's encoding."""
    raw = (Path(ledger.jobs_dir) / f"{job_id}.json").read_text()
    assert raw == json.dumps(json.loads(raw), indent=2) + "\n"
    return record_module.parse_record(json.loads(raw), job_id)


@settings(max_examples=60, deadline=None)
@hypothesis.given(
    message=TEXTS,
    image=TEXTS.filter(str.strip),
    results_dir=st.one_of(st.none(), TEXTS.filter(bool)),
    excludes=st.lists(TEXTS, max_size=2),
    parent_job=NAMES,
    retry_of=NAMES,
)
def test_an_open_returns_the_record_its_file_holds(
    message: str,
    image: str,
    results_dir: str | None,
    excludes: list[str],
    parent_job: str | None,
    retry_of: str | None,
) -> None:
    # The open builds its typed record and reads the file back only when redaction
    # changed a string: whatever it returns is what parsing its file gives.
    with tempfile.TemporaryDirectory() as folder:
        ledger = Ledger(Path(folder), secret_values=["Zq9vXr7TtW3pLm5K"])
        opened = open_job(
            ledger,
            message=message,
            image=image,
            results_root=None if results_dir else "/results",
            results_dir=results_dir,
            upload_excludes=excludes,
            parent_job=parent_job,
            retry_of=retry_of,
        )
        assert opened == _written(ledger, opened.id) == ledger.get(opened.id)
        redactor = lint.Redactor(["Zq9vXr7TtW3pLm5K"])
        assert (opened.image, opened.results_dir) == (
            redactor.location(image),
            redactor.location(results_dir or f"/results/{opened.id}"),
        )
        assert opened.upload_excludes == tuple(map(redactor.text, excludes))
        assert (opened.parent_job, opened.retry_of) == tuple(
            redactor.text(name) if name else None for name in (parent_job, retry_of)
        )
        assert [(t.state, t.message, t.source) for t in opened.transitions] == [
            ("PENDING", redactor.text(message), "agent")
        ]
        assert opened.transitions[0].ts == opened.submitted_at
        data = on_disk(ledger, opened.id)
        assert list(data) == [*RECORDER_KEYS, *(k for k in ("parent_job", "retry_of") if k in data)]


MARKS = st.lists(
    st.tuples(
        st.sampled_from(STATES),
        TEXTS,
        st.sampled_from(SOURCES),
        st.one_of(st.none(), TEXTS),
        st.sampled_from([None, *record_module.ERR_CLASSES]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@hypothesis.given(marks=MARKS, foreign=st.booleans(), message=TEXTS)
def test_a_mark_returns_the_record_its_file_holds(
    marks: list[tuple[str, str, str, str | None, str | None]], foreign: bool, message: str
) -> None:
    # A mark changes the typed record beside the document it writes and reads the file
    # back only when redaction changed a string: what it returns is what the file holds.
    with tempfile.TemporaryDirectory() as folder:
        ledger = Ledger(Path(folder), secret_values=["Zq9vXr7TtW3pLm5K"])
        redactor = lint.Redactor(["Zq9vXr7TtW3pLm5K"])
        if foreign:  # another writer's record, its keys in another order
            job_id = "job-1"
            Path(ledger.jobs_dir).mkdir(parents=True)
            data = hand_written(job_id, "2026-01-01T00:00:00Z", err_class=None)
            data["transitions"][0]["message"] = message  # type: ignore[index]
            ordered = dict(sorted(data.items()))
            path = Path(ledger.jobs_dir) / f"{job_id}.json"
            path.write_text(json.dumps(ordered, indent=2) + "\n")
        else:
            job_id = open_job(ledger, message=message).id
        for state, text, source, backend_ref, err_class in marks:
            before = ledger.get(job_id)
            try:
                marked = ledger.apply(job_id, Mark(state, text, source, backend_ref, err_class))
            except TerminalStateError:
                assert before.terminal_state not in (None, state)
                assert ledger.get(job_id) == before
                continue
            assert marked.record == _written(ledger, job_id) == ledger.get(job_id)
            after = marked.record
            added = [
                (t.state, t.message, t.source) for t in after.transitions[len(before.transitions) :]
            ]
            assert added == [(state, redactor.text(text), source)] * marked.appended
            assert marked.appended == (before.terminal_state is None)
            if err_class and (marked.appended or not before.err_class):
                assert after.err_class == err_class
            if backend_ref and (marked.appended or not before.backend_ref):
                assert after.backend_ref == redactor.location(backend_ref)


def test_marked_record_has_terminal_fields_and_roundtrips(ledger: Ledger) -> None:
    opened = open_job(ledger)
    ledger.mark(opened.id, "RUNNING", message="running", backend_ref="abc123")
    final = ledger.mark(
        opened.id, "ERROR", message="exit 3", source="poller", err_class="ERR_PROGRAM"
    )
    data = on_disk(ledger, opened.id)
    assert set(data) == REQUIRED | {"terminal_write_by", "err_class"}
    assert data["terminal_state"] == "ERROR"
    assert data["terminal_write_by"] == "poller"
    assert data["err_class"] == "ERR_PROGRAM"
    assert data["backend_ref"] == "abc123"
    transitions = data["transitions"]
    assert isinstance(transitions, list)
    assert [t["state"] for t in transitions] == ["PENDING", "RUNNING", "ERROR"]
    for item in transitions:
        assert_transition_shape(item)
    assert record_module.parse_record(data, "record") == final == ledger.get(opened.id)
    assert final.state == "ERROR"
    assert final.terminal_state in TERMINAL


def test_a_record_written_by_another_tao_tool_loads_lists_and_updates(ledger: Ledger) -> None:
    data = hand_written(
        "dino-evaluate-0a1b2c",
        "2024-05-01T10:00:00+00:00",
        parent_job="dino-train-ffffff",
        err_class=None,
    )
    write_foreign(ledger, data)
    record = ledger.get("dino-evaluate-0a1b2c")
    assert record.state == "RUNNING"
    assert record.parent_job == "dino-train-ffffff"
    assert record.upload_excludes == ("*.tmp",)
    assert [r.id for r in ledger.list()] == ["dino-evaluate-0a1b2c"]
    done = ledger.mark(record.id, "COMPLETE", source="backend-hook")
    assert done.terminal_write_by == "backend-hook"
    assert [e["event"] for e in ledger.journal(record.id)] == ["transition"]


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"owner": "me"}, "unknown keys owner"),
        ({"redacted": False}, "redacted"),
        ({"schema_version": "1"}, "schema_version"),
        ({"schema_version": True}, "schema_version"),
        ({"platform": "Docker"}, "platform"),
        ({"storage_tier": "D"}, "storage_tier"),
        ({"image": ""}, "image"),
        ({"upload_excludes": "*.tmp"}, "upload_excludes"),
        ({"submitted_at": "yesterday"}, "submitted_at"),
        ({"terminal_state": "UNKNOWN"}, "terminal_state"),
        ({"err_class": "ERR_OTHER"}, "err_class"),
        ({"transitions": []}, "transitions"),
        (
            {"transitions": [{"ts": "2024-05-01T10:00:00Z", "state": "PENDING", "message": ""}]},
            "transitions[0] lacks source",
        ),
        (
            {
                "transitions": [
                    {
                        "ts": "2024-05-01T10:00:00Z",
                        "state": "DONE",
                        "message": "",
                        "source": "agent",
                    }
                ]
            },
            "transitions[0].state",
        ),
    ],
)
def test_a_malformed_record_is_reported_with_its_file(
    ledger: Ledger, change: dict[str, object], complaint: str
) -> None:
    data = hand_written("bad-1", "2024-05-01T10:00:00Z")
    data.update(change)
    path = write_foreign(ledger, data)
    with pytest.raises(LedgerCorrupt) as caught:
        ledger.get("bad-1")
    assert str(path) in str(caught.value)
    assert complaint in str(caught.value)


def test_missing_keys_and_non_json_are_corrupt(ledger: Ledger) -> None:
    data = hand_written("bad-2", "2024-05-01T10:00:00Z")
    del data["storage_tier"]
    write_foreign(ledger, data)
    with pytest.raises(LedgerCorrupt, match="lacks storage_tier"):
        ledger.get("bad-2")
    (Path(ledger.jobs_dir) / "bad-3.json").write_text("{not json")
    with pytest.raises(LedgerCorrupt, match="bad-3.json: not valid JSON"):
        ledger.get("bad-3")
    with pytest.raises(LedgerCorrupt, match="must be a JSON object"):
        record_module.parse_record([1, 2], "x.json")


def test_a_record_under_another_id_is_corrupt(ledger: Ledger) -> None:
    data = hand_written("other-1", "2024-05-01T10:00:00Z")
    Path(ledger.jobs_dir).mkdir(parents=True)
    (Path(ledger.jobs_dir) / "mine-1.json").write_text(json.dumps(data))
    with pytest.raises(LedgerCorrupt, match="holds the record of other-1"):
        ledger.get("mine-1")


# -- ids ----------------------------------------------------------------------


def test_ids_are_minted_from_arch_and_action(ledger: Ledger) -> None:
    record = open_job(ledger, network_arch="Visual ChangeNet!!", action="--Train  Eval")
    assert re.fullmatch(r"Visual-ChangeNet-Train-Eval-[0-9a-f]{6}", record.id)
    assert re.fullmatch(
        r"weird-job-[0-9a-f]{6}", open_job(ledger, network_arch="_weird.", action="!").id
    )
    assert (Path(ledger.jobs_dir) / f"{record.id}.json").is_file()
    plain = open_job(ledger)
    assert re.fullmatch(r"visual_changenet-train-[0-9a-f]{6}", plain.id)


def test_a_minted_id_that_collides_is_retried(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffixes = iter(["aaaaaa", "aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(jobids, "mint_suffix", lambda: next(suffixes))
    first = open_job(ledger)
    second = open_job(ledger, action="train")
    assert first.id == "visual_changenet-train-aaaaaa"
    assert second.id == "visual_changenet-train-bbbbbb"
    assert ledger.get(first.id) == first
    assert len([e for e in ledger.journal() if e["event"] == "open"]) == 2


def test_an_explicit_id_that_exists_is_refused(ledger: Ledger) -> None:
    first = open_job(ledger, job_id="my-job.1")
    assert first.id == "my-job.1"
    before = (Path(ledger.jobs_dir) / "my-job.1.json").read_bytes()
    with pytest.raises(InvalidInput, match="record already exists: .*/jobs/my-job.1.json"):
        open_job(ledger, job_id="my-job.1", image="other:1")
    assert (Path(ledger.jobs_dir) / "my-job.1.json").read_bytes() == before
    assert len(list(ledger.journal())) == 1


@pytest.mark.parametrize("bad_id", ["../x", "a/b", ".hidden", "", "..", "x\x00y", "x\n", "-x"])
def test_ids_that_could_escape_or_collide_are_refused(
    ledger: Ledger, tmp_path: Path, bad_id: str
) -> None:
    with pytest.raises(InvalidInput, match="invalid job id"):
        open_job(ledger, job_id=bad_id)
    with pytest.raises(InvalidInput, match="invalid job id"):
        ledger.get(bad_id)
    with pytest.raises(InvalidInput, match="invalid job id"):
        ledger.mark(bad_id, "RUNNING")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_unknown_job_names_the_jobs_folder(ledger: Ledger) -> None:
    where = re.escape(str(Path(ledger.jobs_dir) / "nope-1.json"))
    with pytest.raises(UnknownJob, match=f"no job-record at {where}"):
        ledger.get("nope-1")
    with pytest.raises(UnknownJob):
        ledger.mark("nope-1", "RUNNING")
    with pytest.raises(UnknownJob):
        ledger.update_sidecar("nope-1", x=1)
    assert not Path(ledger.jobs_dir).exists()


# -- state root and results dir ----------------------------------------------


@pytest.mark.parametrize("value", ["relative/state", "./x", "~/.tao"])
def test_tao_state_dir_must_be_absolute(value: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(f"must be an absolute path (got {value!r})")):
        Ledger.from_env({"TAO_STATE_DIR": value})


@pytest.mark.parametrize("value", ["", "  "])
def test_tao_state_dir_set_but_empty_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput, match="TAO_STATE_DIR is set but empty; unset it or give"):
        Ledger.from_env({"TAO_STATE_DIR": value})


def test_tao_state_dir_default_and_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Ledger.from_env({}).root == str(tmp_path / ".tao")
    chosen = Ledger.from_env({"TAO_STATE_DIR": str(tmp_path / "s")})
    assert chosen.root == str(tmp_path / "s")
    assert chosen.jobs_dir == str(tmp_path / "s" / "jobs")
    with pytest.raises(InvalidInput, match="absolute"):
        Ledger(Path("relative"))


@hypothesis.given(st.text(alphabet="/.a", max_size=12))
def test_the_ledger_spells_its_root_as_pathlib_does(path: str) -> None:
    assert store.spelled_as_pathlib(path) == str(PurePosixPath(path))


def test_a_missing_record_is_named_as_the_recorder_names_it(tmp_path: Path) -> None:
    ledger = Ledger(f"{tmp_path}//./state/")
    with pytest.raises(UnknownJob) as refused:
        ledger.get("none-1")
    assert str(refused.value) == f"no job-record at {tmp_path / 'state' / 'jobs' / 'none-1.json'}"


def test_results_dir_is_bound_once_at_open_and_stored_as_given(ledger: Ledger) -> None:
    explicit = open_job(ledger, results_root=None, results_dir="/data/run7/")
    assert explicit.results_dir == "/data/run7/"
    marked = ledger.mark(explicit.id, "RUNNING")
    assert marked.results_dir == "/data/run7/"
    for given, stored in [
        ("s3://bucket/exp/run1", "s3://bucket/exp/run1"),
        ("https://user:leakSECRETpw@host/bucket/out", "https://user:<redacted>@host/bucket/out"),
        ("/lustre/exp/token=v1/keyframes/run", "/lustre/exp/token=v1/keyframes/run"),
        ("relative/out", "relative/out"),
    ]:
        opened = open_job(ledger, results_root=None, results_dir=given)
        assert opened.results_dir == stored
        assert on_disk(ledger, opened.id)["results_dir"] == stored
    rooted = open_job(ledger, results_root="gs://b/root/")
    assert rooted.results_dir == f"gs://b/root/{rooted.id}"
    with pytest.raises(InvalidInput, match="exactly one"):
        open_job(ledger, results_dir="/x")
    with pytest.raises(InvalidInput, match="exactly one"):
        open_job(ledger, results_root=None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("platform", "k8s!"),
        ("platform", "a" * 33),
        ("platform", "  "),
        ("storage_tier", "Z"),
        ("image", ""),
        ("network_arch", " "),
        ("upload_excludes", "*.tmp"),
    ],
)
def test_bad_open_fields_are_refused(ledger: Ledger, field: str, value: object) -> None:
    with pytest.raises(InvalidInput):
        open_job(ledger, **{field: value})
    assert list(Path(ledger.jobs_dir).glob("*.json")) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message", 5),
        ("message", None),
        ("message", b"launched"),
        ("parent_job", 7),
        ("retry_of", ["r-1"]),
        ("results_dir", Path("/results/x")),
    ],
)
def test_ill_typed_open_fields_are_refused_before_anything_is_written(
    ledger: Ledger, field: str, value: object
) -> None:
    # The record is not read back after an open that redaction leaves alone, so the
    # types that reading checked are checked first.
    overrides = {field: value, **({"results_root": None} if field == "results_dir" else {})}
    with pytest.raises(InvalidInput, match=f"{field} must be a string"):
        open_job(ledger, **overrides)
    assert not Path(ledger.root).exists()


# -- transitions --------------------------------------------------------------


def test_terminal_states_are_immutable(ledger: Ledger) -> None:
    record = open_job(ledger)
    done = ledger.mark(record.id, "COMPLETE", message="exit 0", source="poller")
    lines = journal_lines(ledger)
    before = (Path(ledger.jobs_dir) / f"{record.id}.json").read_bytes()
    again = ledger.mark(record.id, "COMPLETE", message="seen again")
    assert again == done
    assert journal_lines(ledger) == lines
    assert (Path(ledger.jobs_dir) / f"{record.id}.json").read_bytes() == before
    for other in ("ERROR", "RUNNING", "CANCELED"):
        with pytest.raises(
            TerminalStateError,
            match=f"record {record.id} is terminal \\(COMPLETE\\); refusing transition to {other}",
        ):
            ledger.mark(record.id, other)
    assert isinstance(TerminalStateError("x"), InvalidInput)
    assert ledger.get(record.id).transitions == done.transitions


def test_bad_mark_arguments_are_refused(ledger: Ledger) -> None:
    record = open_job(ledger)
    with pytest.raises(InvalidInput, match="invalid state"):
        ledger.mark(record.id, "DONE")
    with pytest.raises(InvalidInput, match="invalid source"):
        ledger.mark(record.id, "RUNNING", source="cron")
    with pytest.raises(InvalidInput, match="invalid err_class"):
        ledger.mark(record.id, "ERROR", err_class="ERR_MAYBE")
    assert ledger.get(record.id) == record


@pytest.mark.parametrize(
    ("field", "value"),
    [("message", 5), ("message", None), ("backend_ref", 5), ("backend_ref", ["x"])],
)
@pytest.mark.parametrize("state", ["RUNNING", "COMPLETE"])
def test_ill_typed_mark_fields_are_refused_and_change_nothing(
    ledger: Ledger, field: str, value: object, state: str
) -> None:
    # The record is not read back after a mark redaction leaves alone, so the types that
    # reading checked are checked first; COMPLETE again is a repeat that may enrich.
    record = open_job(ledger)
    if state == "COMPLETE":
        record = ledger.mark(record.id, "COMPLETE")
    path = Path(ledger.jobs_dir) / f"{record.id}.json"
    before, lines = path.read_bytes(), journal_lines(ledger)
    with pytest.raises(InvalidInput, match=f"{field} must be a string"):
        ledger.mark(record.id, state, **{field: value})  # type: ignore[arg-type]
    assert path.read_bytes() == before
    assert journal_lines(ledger) == lines


def test_journal_has_one_line_per_open_and_transition(ledger: Ledger) -> None:
    a = open_job(ledger, sidecar={"target": "gpu-box", "fingerprint": "sha256:ab", "x": 1})
    b = open_job(ledger, retry_of=a.id)
    ledger.mark(a.id, "RUNNING", backend_ref="c0ffee")
    ledger.mark(b.id, "ERROR", err_class="ERR_INFRA", message="Xid 79")
    ledger.mark(b.id, "ERROR")  # no-op: no line
    lines = journal_lines(ledger)
    assert len(lines) == 4
    events = [json.loads(line) for line in lines]
    assert [(e["event"], e["id"], e["state"]) for e in events] == [
        ("open", a.id, "PENDING"),
        ("open", b.id, "PENDING"),
        ("transition", a.id, "RUNNING"),
        ("transition", b.id, "ERROR"),
    ]
    first = events[0]
    assert first["platform"] == "docker"
    assert first["network_arch"] == "visual_changenet"
    assert first["action"] == "train"
    assert first["results_dir"] == a.results_dir
    assert (first["target"], first["fingerprint"]) == ("gpu-box", "sha256:ab")
    assert "x" not in first
    assert events[1]["retry_of"] == a.id
    assert events[2]["backend_ref"] == "c0ffee"
    assert events[3]["err_class"] == "ERR_INFRA"
    assert events[3]["message"] == "Xid 79"
    for event in events:
        assert TS_RE.fullmatch(event["ts"])
    assert list(ledger.journal(a.id)) == [events[0], events[2]]
    assert list(ledger.journal()) == events


def test_a_long_message_stays_whole_in_the_record_and_fits_one_journal_line(
    ledger: Ledger,
) -> None:
    record = open_job(ledger, results_root="/r/" + "d" * 3000)
    long_message = "traceback line\n" * 2000
    marked = ledger.mark(record.id, "ERROR", message=long_message + "é" * 3000)
    assert marked.transitions[-1].message.startswith(long_message)
    assert len(marked.transitions[-1].message) == len(long_message) + 3000
    lines = journal_lines(ledger)
    assert len(lines) == 2
    for line in lines:
        assert len(line) + 1 < 4096
        assert json.loads(line)["id"] == record.id
    assert json.loads(lines[1])["message"].endswith("...[truncated]")


def test_a_torn_last_line_is_skipped_and_fenced_off(ledger: Ledger) -> None:
    record = open_job(ledger)
    with Path(ledger.journal_path).open("ab") as stream:
        stream.write(b'{"ts":"2024-05-01T10:00:00.000000Z","id":"x","ev')
    assert [e["event"] for e in ledger.journal()] == ["open"]
    ledger.mark(record.id, "RUNNING")
    events = list(ledger.journal())
    assert [e["event"] for e in events] == ["open", "transition"]
    lines = journal_lines(ledger)
    assert lines[1].endswith(b'"ev')
    assert json.loads(lines[2])["state"] == "RUNNING"
    assert ledger.list()[0].id == record.id


def test_journal_of_an_empty_ledger_is_empty(ledger: Ledger) -> None:
    assert list(ledger.journal()) == []
    assert ledger.list() == []


# -- redaction ------------------------------------------------------------------


def test_secrets_never_reach_any_file(tmp_path: Path) -> None:
    secret = "Zq9vXr7TtW3pLm5K"
    token = "nvapi-AbCdEf0123456789GhIjKlMnOpQrStUv"
    ledger = Ledger(tmp_path / "state", secret_values=[secret])
    record = open_job(
        ledger,
        image=f"registry.example.com/team/image:{secret}",
        results_root=f"/results/{secret}",
        upload_excludes=[f"*{secret}*"],
        message=f"opened with NGC_KEY={token}",
        sidecar={"docker_host": f"ssh://{secret}@host", "env": {"HF": secret}, "list": [secret]},
    )
    ledger.mark(record.id, "RUNNING", message=f"NGC_KEY={token} rejected", backend_ref=secret)
    ledger.update_sidecar(record.id, note=f"used {secret}", NGC_KEY=token)
    ledger.mark(record.id, "ERROR", message=f"failed: {token}")
    files = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        data = path.read_bytes()
        assert secret.encode() not in data, path
        assert b"AbCdEf0123456789" not in data, path
    text = (Path(ledger.jobs_dir) / f"{record.id}.json").read_text()
    assert "<redacted>" in text
    assert "<redacted>" in ledger.sidecar(record.id)["note"]  # type: ignore[operator]
    assert ledger.get(record.id).backend_ref == "<redacted>"


def test_an_explicit_id_carrying_a_secret_is_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "state", secret_values=["Zq9vXr7TtW3pLm5K"])
    with pytest.raises(InvalidInput, match="secret") as caught:
        open_job(ledger, job_id="run-Zq9vXr7TtW3pLm5K")
    assert "Zq9vXr7TtW3pLm5K" not in str(caught.value)
    assert list(tmp_path.rglob("*.json")) == []


# -- sidecar --------------------------------------------------------------------


def test_the_sidecar_stays_out_of_the_record(ledger: Ledger) -> None:
    notes = {"spec": "/jobs/train.yaml", "plan_digest": "sha256:00", "gpus": ("0", "1")}
    record = open_job(ledger, sidecar={**notes, "spec_path": Path("/jobs/train.yaml")})
    data = on_disk(ledger, record.id)
    assert set(data) == REQUIRED
    assert "plan_digest" not in json.dumps(data)
    sidecar_path = Path(ledger.jobs_dir) / f"{record.id}.taospec"
    assert json.loads(sidecar_path.read_text())["gpus"] == ["0", "1"]
    assert ledger.sidecar(record.id) == {
        "spec": "/jobs/train.yaml",
        "plan_digest": "sha256:00",
        "gpus": ["0", "1"],
        "spec_path": "/jobs/train.yaml",
    }
    ledger.update_sidecar(record.id, image_digest="sha256:11", gpus=["2"])
    merged = ledger.sidecar(record.id)
    assert merged["image_digest"] == "sha256:11"
    assert merged["gpus"] == ["2"]
    assert merged["spec"] == "/jobs/train.yaml"
    assert set(on_disk(ledger, record.id)) == REQUIRED
    bare = open_job(ledger)
    assert ledger.sidecar(bare.id) == {}
    assert [r.id for r in ledger.list()] == [bare.id, record.id]


def test_notes_naming_the_minted_id_are_written_with_the_sidecar(ledger: Ledger) -> None:
    asked: list[str] = []

    def named(job_id: str) -> dict[str, object]:
        asked.append(job_id)
        return {"plan": {"job_id": job_id}, "spec": "/jobs/other.yaml"}

    record = open_job(ledger, sidecar={"spec": "/jobs/train.yaml", "x": 1}, sidecar_for=named)
    assert asked == [record.id]
    assert ledger.sidecar(record.id) == {
        "spec": "/jobs/other.yaml",
        "x": 1,
        "plan": {"job_id": record.id},
    }
    opened = [e for e in ledger.journal(record.id) if e["event"] == "open"]
    assert len(opened) == 1


def test_notes_naming_the_id_are_redacted_and_checked_like_the_rest(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "state", secret_values=["Zq9vXr7TtW3pLm5K"])
    record = open_job(ledger, sidecar_for=lambda job_id: {"argv": ["login", "Zq9vXr7TtW3pLm5K"]})
    assert "Zq9vXr7TtW3pLm5K" not in (Path(ledger.jobs_dir) / f"{record.id}.taospec").read_text()
    with pytest.raises(InvalidInput, match="sidecar.when: datetime"):
        open_job(ledger, sidecar_for=lambda job_id: {"when": __import__("datetime").datetime.now()})
    assert [r.id for r in ledger.list()] == [record.id]


def test_sidecar_values_must_be_json(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="sidecar.when: datetime"):
        open_job(ledger, sidecar={"when": __import__("datetime").datetime.now()})
    with pytest.raises(InvalidInput, match="float"):
        open_job(ledger, sidecar={"ratio": float("nan")})
    assert list(Path(ledger.jobs_dir).glob("*.json")) == []


# -- listing --------------------------------------------------------------------


def test_list_is_newest_first_with_state_filter_and_limit(ledger: Ledger) -> None:
    ids = [open_job(ledger, action=f"step{i}").id for i in range(6)]
    ledger.mark(ids[1], "COMPLETE")
    ledger.mark(ids[3], "COMPLETE")
    ledger.mark(ids[4], "RUNNING")
    assert [r.id for r in ledger.list()] == ids[::-1]
    assert [r.id for r in ledger.list(limit=2)] == [ids[5], ids[4]]
    assert [r.id for r in ledger.list(state="COMPLETE")] == [ids[3], ids[1]]
    assert [r.id for r in ledger.list(state="COMPLETE", limit=1)] == [ids[3]]
    assert [r.id for r in ledger.list(state="PENDING")] == [ids[5], ids[2], ids[0]]
    assert ledger.list(state="CANCELED") == []
    assert ledger.list(limit=0) == []
    with pytest.raises(InvalidInput):
        ledger.list(state="DONE")
    with pytest.raises(InvalidInput):
        ledger.list(limit=-1)


def test_a_limit_past_what_a_list_can_hold_lists_every_record(ledger: Ledger) -> None:
    # ls --limit 9223372036854775808 ended in a traceback (islice takes no such stop)
    ids = [open_job(ledger).id for _ in range(2)]
    assert [r.id for r in ledger.list(limit=2**63)] == ids[::-1]


def test_list_with_a_small_limit_reads_only_the_newest_records(ledger: Ledger) -> None:
    ids = [open_job(ledger).id for _ in range(5)]
    (Path(ledger.jobs_dir) / f"{ids[0]}.json").write_text("garbage")
    warnings: list[str] = []
    assert [r.id for r in ledger.list(limit=2, warn=warnings.append)] == [ids[4], ids[3]]
    assert warnings == []
    assert [r.id for r in ledger.list(warn=warnings.append)] == ids[:0:-1]
    assert len(warnings) == 1
    assert f"{ids[0]}.json: not valid JSON" in warnings[0]


def test_list_without_a_journal_scans_the_records(ledger: Ledger) -> None:
    ids = [open_job(ledger).id for _ in range(3)]
    Path(ledger.journal_path).unlink()
    (Path(ledger.jobs_dir) / f".{ids[0]}.json.0123456789ab.tmp").write_text("{")
    assert [r.id for r in ledger.list()] == ids[::-1]
    assert [r.id for r in ledger.list(limit=1)] == [ids[2]]


def test_list_merges_records_the_journal_does_not_know(ledger: Ledger) -> None:
    ours = [open_job(ledger).id for _ in range(2)]
    write_foreign(ledger, hand_written("old-1", "2000-01-01T00:00:00Z"))
    write_foreign(ledger, hand_written("new-1", "2999-01-01T00:00:00.5Z"))
    listed = [r.id for r in ledger.list()]
    assert listed == ["new-1", ours[1], ours[0], "old-1"]
    assert [r.id for r in ledger.list(state="RUNNING")] == ["new-1", "old-1"]


def test_an_open_reserves_the_name_exclusively(ledger: Ledger) -> None:
    Path(ledger.jobs_dir).mkdir(parents=True)
    (Path(ledger.jobs_dir) / "taken-1.json").write_bytes(b"")  # another writer's reservation
    with pytest.raises(InvalidInput, match="record already exists: .*taken-1.json"):
        open_job(ledger, job_id="taken-1")
    assert (Path(ledger.jobs_dir) / "taken-1.json").read_bytes() == b""
    record = open_job(ledger, job_id="free-1")
    assert ledger.get("free-1") == record
    names = sorted(os.listdir(ledger.jobs_dir))
    # the open took each id's lock, the recorder's lock file, and left no temp file
    assert names == [".free-1.json.lock", ".taken-1.json.lock", "free-1.json", "taken-1.json"]


@pytest.mark.parametrize(
    ("given", "slug"),
    [("Docker ", "docker"), ("SLURM", "slurm"), ("My_Platform", "my-platform"),
     ("-kratos-", "kratos"), ("my  platform", "my-platform"), ("a__b--c", "a-b-c")],
)  # fmt: skip
def test_platform_names_are_normalised_as_the_recorder_does(
    ledger: Ledger, given: str, slug: str
) -> None:
    assert open_job(ledger, platform=given).platform == slug


# -- many processes -------------------------------------------------------------


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_sixteen_processes_lose_no_transition(ledger: Ledger, tmp_path: Path) -> None:
    workers, count = 16, 20
    shared = open_job(ledger, job_id="shared-1")
    own = [open_job(ledger, job_id=f"own-{i}").id for i in range(workers)]
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "mark",
                str(ledger.root),
                str(go),
                f"w{i}",
                str(count),
                shared.id,
                own[i],
            ],
            env=worker_env(),
        )
        for i in range(workers)
    ]
    time.sleep(0.5)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * workers

    messages = [t.message for t in ledger.get(shared.id).transitions[1:]]
    assert len(messages) == workers * count
    assert set(messages) == {f"w{i} shared {n}" for i in range(workers) for n in range(count)}
    for i, job_id in enumerate(own):
        record = ledger.get(job_id)
        assert [t.message for t in record.transitions[1:]] == [
            f"w{i} own {n}" for n in range(count)
        ]
    for path in Path(ledger.jobs_dir).glob("*.json"):
        assert isinstance(json.loads(path.read_text()), dict)
    lines = journal_lines(ledger)
    parsed = [json.loads(line) for line in lines]
    transitions = [e for e in parsed if e["event"] == "transition"]
    assert len(lines) == 1 + workers + 2 * workers * count
    assert len(transitions) == 2 * workers * count
    assert sorted(e["message"] for e in transitions if e["id"] == shared.id) == sorted(messages)


def test_a_writer_killed_at_random_moments_leaves_only_valid_records(
    ledger: Ledger,
) -> None:
    rng = random.Random(20240501)
    kills = 24
    for _ in range(kills):
        with subprocess.Popen(
            [sys.executable, str(WORKER), "churn", str(ledger.root)],
            env=worker_env(),
            stdout=subprocess.PIPE,
        ) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0.0, 0.12))
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL

    names = [p.name for p in Path(ledger.jobs_dir).iterdir()]
    records = [n for n in names if n.endswith(".json") and not n.startswith(".")]
    reserved = [n for n in records if (Path(ledger.jobs_dir) / n).stat().st_size == 0]
    assert len(reserved) <= kills  # an open killed between reserving and renaming
    records = [n for n in records if n not in reserved]
    assert len(records) > kills
    for name in records:
        path = Path(ledger.jobs_dir) / name
        record = record_module.parse_record(json.loads(path.read_bytes()), name)
        assert f"{record.id}.json" == name
        assert ledger.get(record.id) == record
    for name in names:
        if name.endswith(".taospec"):
            assert isinstance(json.loads((Path(ledger.jobs_dir) / name).read_bytes()), dict)
    then = time.time() - durable.STALE_AFTER - 1  # the dead writers' temp files, left long ago
    for name in names:
        if name.endswith(".tmp"):
            os.utime(Path(ledger.jobs_dir) / name, (then, then))
    warnings: list[str] = []
    listed = ledger.list(warn=warnings.append)
    assert {r.id for r in listed} == {n.removesuffix(".json") for n in records}
    assert len(warnings) == len(reserved)
    assert all("empty (an open in progress" in w for w in warnings)
    temps = [n for n in os.listdir(ledger.jobs_dir) if n.endswith(".tmp")]
    assert temps == []  # the dead writers' temp files went with the listing

    lines = journal_lines(ledger)
    for line in lines[:-1]:
        assert isinstance(json.loads(line), dict)
    events = list(ledger.journal())
    assert len(events) >= len(lines) - 1
    opens = {e["id"] for e in events if e["event"] == "open"}
    assert opens <= {r.id for r in listed}


# -- speed ------------------------------------------------------------------------


def test_list_with_a_limit_does_not_read_every_record(ledger: Ledger) -> None:
    for _ in range(300):
        open_job(ledger)
    reads: list[str] = []
    original = store._read_bytes

    def counting(path: str) -> bytes:
        reads.append(path)
        return original(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "_read_bytes", counting)
        newest = ledger.list(limit=3)
    assert len(newest) == 3
    assert len(reads) == 3
