"""Work shared among forked worker processes, answers handed back in order.

``validate`` over hundreds of files is pure CPU work per file, so a machine
with several CPUs can check several files at once. :func:`ordered` forks
worker processes (after the parent has imported everything, so they start at
once and share its memory), hands each a few items at a time as it finishes
the last ones (a worker slowed down by other load gets fewer), and yields the
answers in item order, each as soon as it and all before it are in. The
caller prints exactly what it would print checking the items one by one.

A worker talks to the parent only through two pipes of its own: item ranges
go down one, answers (:mod:`marshal` data: text, numbers, None, tuples) come
back up the other. A worker never writes to the terminal and never returns
into the caller's code: it leaves through :func:`os._exit`. Whatever goes
wrong is loud, never a silently missing answer: an exception in ``work``
raises :class:`WorkerFailed` with the worker's traceback at that item, and a
worker that ends without answering (killed, crashed) raises it naming the
first item left unanswered. A worker killed by SIGINT (Ctrl-C reaches the
whole process group) is :class:`KeyboardInterrupt` in the parent. However the
parent stops, every worker still running is killed and reaped.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import select
import signal
import sys

from taospec.errors import TaospecError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from typing import Any

_RANGE = 8
"""Bytes of one item range sent to a worker: first and end index, 4 bytes each."""
_LENGTH = 4
"""Bytes of the length that comes before each answer frame."""
_MOST = 16
"""The most items sent to a worker at once."""


class WorkerFailed(TaospecError):
    """A worker process raised an exception or ended before answering (a bug: exit 3)."""


def cpus() -> int:
    """How many CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def ordered(
    work: Callable[[int], Any],
    count: int,
    workers: int,
    label: Callable[[int], str] = lambda index: f"item {index + 1}",
    finish: Callable[[], object] = lambda: None,
) -> Generator[Any, None, None]:
    """``work(0)``, ``work(1)``, ... ``work(count - 1)``, computed in ``workers`` processes.

    ``work`` runs in forked children and must return :mod:`marshal` data.
    Answers are yielded in index order. ``label`` names an item in a
    :class:`WorkerFailed` message; ``finish`` runs in each worker after its
    last item (to save what it gathered). Close the iterator (or let it end)
    to stop and reap the workers.
    """
    pool = _Pool(work, count, workers, label, finish)
    try:
        yield from pool.answers()
    finally:
        pool.stop()


class _Worker:
    def __init__(self, pid: int, tasks: int, answers: int) -> None:
        self.pid = pid
        self.tasks: int | None = tasks
        self.answers = answers
        self.buffer = b""
        self.pending: list[tuple[int, int]] = []
        self.status: int | None = None


class _Pool:
    def __init__(
        self,
        work: Callable[[int], Any],
        count: int,
        workers: int,
        label: Callable[[int], str],
        finish: Callable[[], object],
    ) -> None:
        self.work = work
        self.label = label
        self.finish = finish
        self.count = count
        self.size = max(1, min(workers, count))
        self.next = 0
        self.workers: list[_Worker] = []

    # -- parent ----------------------------------------------------------------

    def answers(self) -> Iterator[Any]:
        sys.stdout.flush()
        sys.stderr.flush()
        # What is loaded by now lives as long as the process: no collection need look at it
        # again, in the workers (whose pages then stay shared) or at the parent's exit.
        gc.freeze()
        for _ in range(self.size):
            self._fork()
        for worker in self.workers:
            for _ in range(2):  # one to work on, one queued: no worker waits for the parent
                self._give(worker)
        done: dict[int, Any] = {}
        failures: dict[int, str] = {}
        shown = 0
        while shown < self.count:
            while shown in done:
                yield done.pop(shown)
                shown += 1
            if shown in failures:
                raise WorkerFailed(failures[shown])
            if shown >= self.count:
                break
            self._receive(done, failures)

    def _receive(self, done: dict[int, Any], failures: dict[int, str]) -> None:
        """Wait for some worker to answer or end; file what it says."""
        by_fd = {w.answers: w for w in self.workers if w.status is None}
        if not by_fd:  # cannot happen: every unanswered item is some live worker's or failed
            raise WorkerFailed(f"no worker process is left to answer for {self.label(self.next)}")
        ready, _, _ = select.select(list(by_fd), [], [])
        for fd in ready:
            worker = by_fd[fd]
            data = os.read(fd, 1 << 16)
            if not data:
                self._ended(worker, failures)
                continue
            worker.buffer += data
            while len(worker.buffer) >= _LENGTH:
                size = int.from_bytes(worker.buffer[:_LENGTH], "big")
                if len(worker.buffer) < _LENGTH + size:
                    break
                frame = worker.buffer[_LENGTH : _LENGTH + size]
                worker.buffer = worker.buffer[_LENGTH + size :]
                first, results, failure = marshal.loads(frame)  # noqa: S302 - our own child
                for offset, result in enumerate(results):
                    done[first + offset] = result
                worker.pending = [r for r in worker.pending if r[0] != first]
                if failure is not None:  # the worker stops after this frame
                    where = self.label(first + len(results))
                    failures[first + len(results)] = (
                        f"a worker process failed on {where}:\n{failure}"
                    )
                    continue
                self._give(worker)

    def _ended(self, worker: _Worker, failures: dict[int, str]) -> None:
        """``worker`` closed its end: reap it, and fail its unanswered items, if any."""
        os.close(worker.answers)
        _, status = os.waitpid(worker.pid, 0)
        worker.status = status
        if worker.tasks is not None:
            os.close(worker.tasks)
            worker.tasks = None
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT:
            raise KeyboardInterrupt
        for first, _ in worker.pending:
            if first not in failures:
                how = (
                    f"was killed by signal {os.WTERMSIG(status)}"
                    if os.WIFSIGNALED(status)
                    else f"exited with status {os.waitstatus_to_exitcode(status)}"
                )
                failures[first] = f"a worker process {how} before answering for {self.label(first)}"

    def _give(self, worker: _Worker) -> None:
        """Send ``worker`` the next range of items, or tell it there are none left."""
        if worker.tasks is None:
            return
        if self.next >= self.count:
            if not worker.pending:
                os.close(worker.tasks)  # end of input: the worker exits
                worker.tasks = None
            return
        # Large ranges first, smaller towards the end, so that workers finish together.
        chunk = max(1, min(_MOST, (self.count - self.next) // (self.size * 4)))
        first, end = self.next, self.next + chunk
        self.next = end
        worker.pending.append((first, end))
        try:
            _write_all(worker.tasks, first.to_bytes(4, "big") + end.to_bytes(4, "big"))
        except OSError:  # it is gone; its answer pipe says so next, and its items fail
            os.close(worker.tasks)
            worker.tasks = None

    def stop(self) -> None:
        """Reap every worker: finished ones exit by themselves, the others are killed."""
        for worker in self.workers:
            if worker.status is not None:
                continue
            if worker.tasks is not None:
                os.close(worker.tasks)
                worker.tasks = None
            if worker.pending:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
            os.close(worker.answers)
            _, worker.status = os.waitpid(worker.pid, 0)

    def _fork(self) -> None:
        """Start one more worker. Ctrl-C waits until it is on the list :meth:`stop` reaps."""
        tasks_read, tasks_write = os.pipe()
        answers_read, answers_write = os.pipe()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            pid = os.fork()
            if pid == 0:  # the worker: it never returns from here
                code = 1
                try:
                    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it, quietly
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                    for other in self.workers:
                        if other.tasks is not None:
                            os.close(other.tasks)
                        os.close(other.answers)
                    os.close(tasks_write)
                    os.close(answers_read)
                    self._serve(tasks_read, answers_write)
                    code = 0
                finally:
                    os._exit(code)
            self.workers.append(_Worker(pid, tasks_write, answers_read))
        except OSError:  # no process could be started
            os.close(tasks_write)
            os.close(answers_read)
            raise
        finally:
            os.close(tasks_read)
            os.close(answers_write)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    # -- worker ----------------------------------------------------------------

    def _serve(self, tasks: int, answers: int) -> None:
        """Answer each range the parent sends until it closes the pipe."""
        while True:
            request = _read_exactly(tasks, _RANGE)
            if not request:
                self.finish()
                return
            first, end = int.from_bytes(request[:4], "big"), int.from_bytes(request[4:], "big")
            results: list[Any] = []
            failure = None
            for index in range(first, end):
                try:
                    results.append(self.work(index))
                except Exception:
                    import traceback

                    failure = traceback.format_exc()
                    break
            frame = marshal.dumps((first, results, failure))
            _write_all(answers, len(frame).to_bytes(_LENGTH, "big") + frame)
            if failure is not None:
                return


def _read_exactly(fd: int, size: int) -> bytes:
    """``size`` bytes from ``fd``, or b"" at end of input."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
