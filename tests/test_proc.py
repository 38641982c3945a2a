"""Waiting for a command with a timeout: bounded, whatever the command leaves holding its output."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taospec import proc
from tests.conftest import returned


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where a command writes the pid of the ``sleep`` it leaves behind, killed afterwards."""
    path = tmp_path / "pid"
    yield path
    if path.exists() and path.read_text().strip():
        pid = int(path.read_text())
        if proc.alive(pid):
            os.kill(pid, signal.SIGKILL)


def left_behind(pid_file: Path) -> int:
    """The pid a command wrote to ``pid_file`` (at most 30 s from now)."""
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text().endswith("\n"):
            return int(pid_file.read_text())
        time.sleep(0.1)
    raise AssertionError(f"nothing wrote {pid_file}")


def test_a_timed_run_is_not_held_by_what_its_command_started(pid_file: Path) -> None:
    # after the timeout the command was killed, then its output read until the sleep it
    # started, which holds its pipes, ended: a minute later
    script = f"sleep 60 & echo $! > {pid_file}; echo started; wait"
    answer = returned(lambda: proc.run(["sh", "-c", script], timeout=1, check=False), 30)
    assert answer, "the timeout did not bound the wait"
    (result,) = answer
    assert result.timed_out
    assert result.stdout == "started\n"
    assert result.stderr.endswith("(taospec: timed out after 1 s)")
    assert not result.ok


def test_a_timed_run_ends_when_its_command_does(pid_file: Path) -> None:
    # an ssh ControlMaster, a docker CLI helper: work left running holds the output
    script = f"sleep 60 & echo $! > {pid_file}; echo done"
    answer = returned(lambda: proc.run(["sh", "-c", script], timeout=600), 30)
    assert answer, "the run waited for what its command left running"
    (result,) = answer
    assert (result.ok, result.stdout, result.stderr) == (True, "done\n", "")
    assert not result.timed_out
    assert proc.alive(left_behind(pid_file))  # not ours to stop


def test_a_command_leading_its_own_group_is_stopped_with_it(pid_file: Path) -> None:
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    answer = returned(lambda: proc.run(["setsid", "sh", "-c", script], timeout=1, check=False), 30)
    assert answer, "the timeout did not bound the wait"
    assert answer[0].timed_out
    assert not proc.alive(left_behind(pid_file))


def test_a_started_query_is_waited_for_at_most_its_timeout(pid_file: Path) -> None:
    # doctor's docker info, read with a timeout
    started = proc.start(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; echo asked; wait"])
    answer = returned(lambda: started.wait(1), 30)
    assert answer, "the timeout did not bound the wait"
    (result,) = answer
    assert (result.stdout, result.timed_out) == ("asked\n", True)
    assert "(taospec: timed out after 1 s)" in result.output()


def test_discarding_a_query_is_not_held_by_what_it_started(pid_file: Path) -> None:
    started = proc.start(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; exec sleep 600"])
    left_behind(pid_file)
    assert returned(started.discard, 30), "discarding waited for what the query started"


def test_how_a_process_ended_names_the_signal_that_ended_it() -> None:
    # a follow whose docker CLI died of SIGTERM said "docker exited -15"
    killed = proc.run(["sh", "-c", "kill -KILL $$"], check=False)  # a TERM may be ignored
    assert proc.how_it_ended(killed.returncode) == "was ended by SIGKILL"
    exited = proc.run(["sh", "-c", "exit 143"], check=False)
    assert proc.how_it_ended(exited.returncode) == "exited 143"


def test_a_detached_start_in_a_working_folder_gone_says_which_folder(tmp_path: Path) -> None:
    # the kernel's "no such file" for a missing working folder read as the program's
    gone = tmp_path / "gone"
    with pytest.raises(proc.FolderGone) as raised:
        proc.spawn_detached(["/bin/true"], env={}, cwd=str(gone), log_path=str(tmp_path / "log"))
    assert raised.value.folder == str(gone)
    assert f"cannot start in {gone}: no such folder" in str(raised.value)
    with pytest.raises(proc.NotStarted):  # the program itself missing stays that
        proc.spawn_detached(
            [str(tmp_path / "nothing")], env={}, cwd=str(tmp_path), log_path=str(tmp_path / "log")
        )
