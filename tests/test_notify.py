"""A notifier runs with the job's outcome in its environment; a failure is reported, not raised."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from taospec import notify, proc
from taospec.errors import InvalidInput
from tests.conftest import returned

OUTCOME = notify.outcome("dino-train-a1b2", "ERROR", "ERR_PROGRAM", 3725.4, "/data/results/x")


def written_env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().split("\0") if "=" in line)
    return dict(pairs)


def test_the_notifier_gets_the_outcome_and_the_current_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_CHANNEL", "#training")
    out = tmp_path / "env"
    assert notify.notify(["sh", "-c", 'env -0 >"$1"', "sh", str(out)], OUTCOME) is None
    seen = written_env(out)
    assert {k: seen.get(k) for k, _ in OUTCOME} == {
        "TAOSPEC_JOB_ID": "dino-train-a1b2",
        "TAOSPEC_STATE": "ERROR",
        "TAOSPEC_ERR_CLASS": "ERR_PROGRAM",
        "TAOSPEC_DURATION": "3725",
        "TAOSPEC_RESULTS_DIR": "/data/results/x",
    }
    assert seen["SLACK_CHANNEL"] == "#training"
    added = set(seen) - set(os.environ) - {"PWD", "SHLVL", "_", "OLDPWD"}
    assert added == {name for name, _ in OUTCOME}


def test_a_complete_job_has_an_empty_error_class(tmp_path: Path) -> None:
    out = tmp_path / "env"
    done = notify.outcome("j", "COMPLETE", None, 12.6, "/r")
    assert notify.notify(["sh", "-c", 'env -0 >"$1"', "sh", str(out)], done) is None
    seen = written_env(out)
    assert (seen["TAOSPEC_ERR_CLASS"], seen["TAOSPEC_DURATION"]) == ("", "13")


def test_a_failing_notifier_is_reported_with_its_output() -> None:
    argv = ["sh", "-c", "echo 'webhook: 403 Forbidden' >&2; exit 3"]
    message = notify.notify(argv, OUTCOME)
    assert message is not None
    assert message.startswith("notifier sh -c ")
    assert "failed (exit 3)\n    webhook: 403 Forbidden" in message


def test_a_missing_notifier_is_reported(tmp_path: Path) -> None:
    message = notify.notify([str(tmp_path / "no-such-notifier")], OUTCOME)
    assert message is not None
    assert "could not run" in message
    assert "command not found" in message


def test_a_notifier_that_hangs_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    message = notify.notify(["sleep", "60"], OUTCOME, timeout=0.5)
    assert time.monotonic() - started < 30
    assert message == "notifier sleep 60 ran past its 0.5 s timeout and was stopped"


def test_a_notifier_timing_out_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    # after the timeout, run still waited for the children holding the notifier's output
    pid_file = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {pid_file}; echo started; wait"
    answer = returned(lambda: notify.notify(["sh", "-c", script], OUTCOME, timeout=0.5), 30)
    assert answer, "the notifier's timeout did not bound the wait"
    (message,) = answer
    assert message is not None
    # one sentence, not "failed (exit -15)" then "(taospec: timed out after 0.5 s)"
    assert message == (
        f"notifier sh -c {shlex.quote(script)} ran past its 0.5 s timeout and was stopped"
        "\n    started"
    )
    assert not proc.alive(int(pid_file.read_text()))  # its process group was stopped


def test_work_a_notifier_leaves_in_the_background_does_not_hold_the_run(tmp_path: Path) -> None:
    # 'sleep 45 & echo queued' held run for 45 s: the background sleep held its pipes
    pid_file = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {pid_file}; echo queued"
    answer = returned(lambda: notify.notify(["sh", "-c", script], OUTCOME), 20)
    pid = int(pid_file.read_text())
    try:
        assert answer == [None], "the notifier's background work held the wait"
        assert proc.alive(pid)  # it goes on on its own
    finally:
        os.kill(pid, signal.SIGKILL)


def test_no_notifier_does_nothing() -> None:
    assert notify.notify([], OUTCOME) is None


def test_the_notifier_comes_from_the_environment() -> None:
    assert notify.notifier({}) == ()
    assert notify.notifier({"TAOSPEC_NOTIFY": "  notify-send 'job done'  "}) == (
        "sh",
        "-c",
        "notify-send 'job done'",
    )
    with pytest.raises(InvalidInput, match="TAOSPEC_NOTIFY: line 1: .*curl -u"):
        notify.notifier({"TAOSPEC_NOTIFY": "curl -u admin:hunter2 https://x"})
    with pytest.raises(InvalidInput, match="TAOSPEC_NOTIFY would carry inline secrets"):
        notify.notifier({"TAOSPEC_NOTIFY": "curl -H 'Authorization: Bearer abcdef0123456789'"})
