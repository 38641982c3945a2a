"""A running job's progress from TAO's status.json, as one line for output that is no terminal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from taospec import progress, ticker
from taospec.errors import InvalidInput
from taospec.progress import Progress
from taospec.ticker import Ticker

EVENTS = [
    {"date": "6/1/2025", "time": "10:00:01", "status": "STARTED", "verbosity": "INFO",
     "message": "Starting Visual ChangeNet training"},
    {"status": "RUNNING", "epoch": 0, "max_epoch": 10,
     "message": "Train and Val metrics generated.",
     "kpi": {"train/avg_loss": 0.9123, "val_acc": 0.61}},
    {"status": "RUNNING", "phase": "checkpoint_saved", "epoch": 0,
     "checkpoint_path": "/results/train/model_epoch_000.pth"},
    {"status": "RUNNING", "epoch": 7, "max_epoch": 10,
     "kpi": {"train/avg_loss": 0.41234, "val/avg_loss": 0.5}},
]  # fmt: skip


def lines(events: list[dict[str, object]]) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def test_json_lines_merge_into_the_latest_state(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text(lines(EVENTS))
    assert progress.read(path) == Progress(
        status="RUNNING",
        epoch=7,
        max_epoch=10,
        kpi={"train/avg_loss": 0.41234, "val_acc": 0.61, "val/avg_loss": 0.5},
        phase="checkpoint_saved",
        message="Train and Val metrics generated.",
    )


def test_one_json_list_reads_the_same(tmp_path: Path) -> None:
    jsonl, listed = tmp_path / "a.json", tmp_path / "b.json"
    jsonl.write_text(lines(EVENTS))
    listed.write_text(json.dumps(EVENTS, indent=2))
    assert progress.read(listed) == progress.read(jsonl)


def test_a_last_line_being_written_is_left_for_later(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    complete = lines(EVENTS[:2])
    path.write_text(complete + json.dumps(EVENTS[3])[:25])
    assert progress.read(path) == progress.merge(iter(EVENTS[:2]))
    cut_list = json.dumps(EVENTS)[:-40]
    path.write_text(cut_list)
    assert progress.read(path) == progress.merge(iter(EVENTS[:3]))


def test_a_garbled_line_in_the_middle_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text(lines(EVENTS[:1]) + "{not json\n" + lines(EVENTS[1:2]))
    assert progress.read(path) == progress.merge(iter(EVENTS[:2]))


def test_no_file_or_no_event_is_none(tmp_path: Path) -> None:
    assert progress.read(tmp_path / "status.json") is None
    (tmp_path / "status.json").write_text("")
    assert progress.read(tmp_path / "status.json") is None


def test_status_json_is_found_in_the_action_folder_or_the_results_dir(tmp_path: Path) -> None:
    assert progress.find(tmp_path) is None
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "status.json").write_text(lines(EVENTS))
    assert progress.find(tmp_path, "train") == str(tmp_path / "train" / "status.json")
    assert progress.find(tmp_path) == str(tmp_path / "train" / "status.json")
    (tmp_path / "status.json").write_text(lines(EVENTS[:1]))
    assert progress.find(tmp_path) == str(tmp_path / "status.json")
    assert progress.find(tmp_path, "train") == str(tmp_path / "train" / "status.json")


def test_a_writer_process_and_a_reader_see_each_step(tmp_path: Path) -> None:
    """A real process appends events; each read sees what is complete so far."""
    path = tmp_path / "train" / "status.json"
    path.parent.mkdir()
    seen = []
    for event in EVENTS:
        subprocess.run(
            ["sh", "-c", 'printf "%s\\n" "$1" >>"$2"', "sh", json.dumps(event), str(path)],
            check=True,
        )
        found = progress.read(progress.find(tmp_path, "train") or path)
        assert found is not None
        seen.append((found.status, found.epoch))
    assert seen == [("STARTED", None), ("RUNNING", 0), ("RUNNING", 0), ("RUNNING", 7)]


def test_the_progress_line() -> None:
    state = progress.merge(iter(EVENTS))
    assert ticker.line("train[lr=0.1]", "RUNNING", 3725, state) == (
        "train[lr=0.1]  RUNNING  1h02m  epoch 7/10  "
        "train/avg_loss=0.4123 val_acc=0.61 val/avg_loss=0.5"
    )
    started = progress.merge(iter(EVENTS[:1]))
    assert ticker.line("dino-train-a1", "RUNNING", 42, started) == (
        "dino-train-a1  RUNNING  42s  Starting Visual ChangeNet training"
    )


def test_without_status_json_the_last_output_line_stands_in() -> None:
    bar = "Epoch 3:  10%|#         | 22/220\rEpoch 3:  11%|#1        | 24/220\x1b[K\r\n"
    assert ticker.line("prepare", "RUNNING", 245, None, last_output="loading\n" + bar) == (
        "prepare  RUNNING  4m05s  Epoch 3:  11%|#1        | 24/220"
    )
    assert ticker.line("prepare", "PENDING", 5, None) == "prepare  PENDING  5s"


def test_a_long_line_is_cut_to_the_width() -> None:
    text = ticker.line("t", "RUNNING", 90000, None, last_output="x" * 500)
    assert len(text) == ticker.WIDTH
    assert text.startswith("t  RUNNING  1d01h  xxx")
    assert text.endswith("...")


def test_a_long_line_is_redacted_before_it_is_cut() -> None:
    # status.json's message was cut to the width and redacted after: a token crossing the
    # cut was no longer one, and its first characters were printed
    token = "nvapi-Zq8sup3rs3cretVALUE0123456789XAbCdEfGhIjKlMnOpQrStUvWxYz012345"
    message = "x" * (ticker.WIDTH - 40) + f" loading with {token} now"
    text = ticker.line("t", "RUNNING", 42, Progress(status="STARTED", message=message))
    redacted = f"t  RUNNING  42s  {'x' * (ticker.WIDTH - 40)} loading with <redacted> now"
    assert text == redacted[: ticker.WIDTH - 3] + "..."
    assert "Zq8" not in text


def test_the_ticker_is_due_once_per_interval() -> None:
    now = [1000.0]
    ticker = Ticker(60.0, clock=lambda: now[0])
    due = []
    for step in (0, 30, 59.9, 60, 61, 119, 120, 400):
        now[0] = 1000.0 + step
        due.append(ticker.due())
    assert due == [False, False, False, True, False, False, True, True]
    assert ticker.wait() == 60.0
    now[0] += 45
    assert ticker.wait() == 15.0


def test_the_interval_comes_from_the_environment() -> None:
    assert ticker.interval({}) == 60.0
    assert ticker.interval({"TAOSPEC_PROGRESS_INTERVAL": "5"}) == 5.0
    with pytest.raises(InvalidInput, match="TAOSPEC_PROGRESS_INTERVAL='soon'"):
        ticker.interval({"TAOSPEC_PROGRESS_INTERVAL": "soon"})
    with pytest.raises(InvalidInput):
        ticker.interval({"TAOSPEC_PROGRESS_INTERVAL": "0"})
