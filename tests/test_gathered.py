"""A look's output into a pipe: gathered into blocks, and never held while the reader waits."""

from __future__ import annotations

import errno
import io
import os
import sys
import time

import pytest

from taospec.commands import jobs
from taospec.commands.jobs import LINGER, Gathered


def test_a_block_is_written_once_it_is_full_and_the_rest_at_the_close(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr(jobs, "LINGER", 60.0)
    gathered = Gathered()
    line = "Epoch 1: loss=0.25\n"
    count = jobs.GATHERED_AT_MOST // len(line) + 1
    for _ in range(count):
        gathered.take(line)
    assert out.getvalue() == line * count  # the block filled, and went out
    gathered.take("export NGC_KEY=abc123\n")
    assert out.getvalue() == line * count  # held: nothing read it yet
    gathered.close()
    assert out.getvalue() == line * count + "export NGC_KEY=<redacted>\n"


def test_what_waits_for_more_is_written_when_no_more_comes(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    gathered = Gathered()
    gathered.take("epoch 1\n")
    deadline = time.monotonic() + 10
    while out.getvalue() != "epoch 1\n" and time.monotonic() < deadline:
        time.sleep(LINGER / 5)
    assert out.getvalue() == "epoch 1\n"
    gathered.close()
    assert out.getvalue() == "epoch 1\n"


class ClosedPipe(io.StringIO):
    """Standard output whose reader has gone: every write fails as a closed pipe's does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def test_a_closed_pipe_the_writer_found_stops_the_reader(monkeypatch) -> None:
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    gathered = Gathered()
    gathered.take("epoch 1\n")
    gathered.writer.join(10)  # it wrote after LINGER, found the pipe closed, and stopped
    assert not gathered.writer.is_alive()
    with pytest.raises(BrokenPipeError):
        gathered.take("epoch 2\n")
    with pytest.raises(BrokenPipeError):
        gathered.close()


def test_what_goes_to_stderr_goes_after_what_was_read_before_it(monkeypatch) -> None:
    # taospec logs ID > file 2>&1: brev's words on a read that failed, or a command's trace,
    # come after the job's lines read before them, as a line at a time wrote them.
    both = io.StringIO()
    monkeypatch.setattr("sys.stdout", both)
    monkeypatch.setattr("sys.stderr", both)
    monkeypatch.setattr(jobs, "LINGER", 60.0)
    with Gathered() as gathered:
        gathered.take("epoch 1\n")
        print("brev: connection lost", file=sys.stderr)
        gathered.take("epoch 2\n")
    assert both.getvalue() == "epoch 1\nbrev: connection lost\nepoch 2\n"
    assert sys.stderr is both  # as it was
