"""The verbs on one submitted job: ``logs``, ``cancel`` and ``show``."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from typing import NoReturn, TextIO

from taospec import plantext, platforms, proc, progress, retrying
from taospec.commands.session import ledger_for, say, shown_data
from taospec.errors import EXIT_INVALID, EXIT_JOB_FAILED, EXIT_OK, InvalidInput
from taospec.executor import cancel_job
from taospec.ledger import Ledger, Record
from taospec.lint import redacted
from taospec.plan import plan_from_json, stored_plan
from taospec.platforms.common import redacted_block, redacted_output
from taospec.polling import poll
from taospec.states import COMPLETE, Status, answered


def _print_redacted(text: str) -> None:
    """Print a line of a job's output, or a part of one, redacted."""
    print(redacted_output(text), end="", flush=True)


GATHERED_AT_MOST = 64 * 1024
"""How many characters of a look's output :class:`Gathered` holds before it writes them."""
LINGER = 0.05
"""How long, in seconds, a piece of a look's output waits for more before it is written."""


class Gathered:
    """A look's output going to a pipe or a file: its lines (and parts of lines) gathered
    and written a block at a time, redacted together (:func:`redacted_block`). What was
    read waits at most :data:`LINGER` for more, so a look whose output comes slowly (a
    reader waiting on ssh, on brev or on a pipe) shows each line as a follow would. A
    follow, and a look on a terminal, print each line as it comes instead.

    Used as a context manager, it closes at the end, and what goes to stderr meanwhile
    (what brev says of a read that failed, a command's trace) goes out after what was
    read before it, as it would a line at a time: into one file (``2>&1``) in that order.
    """

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.size = 0
        self.turn = threading.Condition()
        self.ended = False
        self.idle = False  # the writer waits for a first piece
        self.failed: BaseException | None = None  # what stopped the writer (a closed pipe)
        self.writer = threading.Thread(target=self._linger, name="gathered", daemon=True)
        self.writer.start()

    def __enter__(self) -> Gathered:
        self.stderr = sys.stderr
        sys.stderr = _AfterGathered(self, self.stderr)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.stderr = self.stderr
        self.close()

    def flush(self) -> None:
        """Write what is gathered now."""
        with self.turn:
            if self.failed is not None:
                raise self.failed
            self._write()

    def take(self, text: str) -> None:
        """Gather ``text``; write the block once it holds :data:`GATHERED_AT_MOST`."""
        with self.turn:
            if self.failed is not None:
                raise self.failed
            if self.idle:
                self.turn.notify()  # the writer's wait for a first piece is over
            self.pieces.append(text)
            self.size += len(text)
            if self.size >= GATHERED_AT_MOST:
                self._write()

    def close(self) -> None:
        """Write what is gathered, once the writer has stopped."""
        with self.turn:
            self.ended = True
            self.turn.notify()
        self.writer.join()
        if self.failed is not None:
            raise self.failed
        self._write()

    def _linger(self) -> None:
        with self.turn:
            while not self.ended:
                if not self.pieces:
                    self.idle = True
                    self.turn.wait()
                    self.idle = False
                    continue
                self.turn.wait(LINGER)
                try:
                    self._write()
                except BaseException as exc:  # the reader raises it: see take and close
                    self.failed = exc
                    return

    def _write(self) -> None:
        if self.pieces:
            pieces, self.pieces, self.size = self.pieces, [], 0
            print(redacted_block(pieces), end="", flush=True)


class _AfterGathered:
    """Standard error while a look's output is gathered: each write first writes out what
    was gathered."""

    def __init__(self, gathered: Gathered, stream: TextIO) -> None:
        self.gathered = gathered
        self.stream = stream

    def write(self, text: str) -> int:
        self.gathered.flush()
        return self.stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def logs(job_id: str, *, tail: int | None = None, follow: bool = False) -> int:
    """Print the job's output (redacted); with ``follow``, until the job ends, then exit 0
    when it completed and 1 when it ended otherwise (ERROR, CANCELED). A follow whose output
    stops while the job has not ended (its backend stopped answering, or what read the
    output died) is refused (exit 2): the job may still be running; so is a read that
    fails (its container removed), which says nothing of how the job ended."""

    ledger, record, _ = ledger_for(job_id)
    cannot = f"cannot read the output of {job_id}"
    if record.terminal_state is None:
        record, found = poll(record, ledger)  # heals a mark a failed write lost
        answered(found, cannot)
    module = platforms.get(record.platform)
    sidecar = ledger.sidecar(job_id)
    said: list[str] = []  # what read the output said of why it stopped, and who exited
    gathered = None if follow or sys.stdout.isatty() else Gathered()
    show = _print_redacted if gathered is None else gathered.take
    with gathered or contextlib.nullcontext():
        code = module.logs(
            record,
            sidecar,
            tail=tail,
            follow=follow,
            on_line=show,
            on_said=lambda line: said.append(line.strip()),
            on_part=show,  # of a line redrawn in place, a progress bar
        )
    how = "; ".join(said) or f"{record.platform} {proc.how_it_ended(code)}"
    ended = _ended(ledger, job_id) if follow else None
    if ended is not None and not ended.terminal:
        _stopped_following(job_id, f"its output stopped ({how})", ended)
    if code != 0:  # what the backend said is printed above, or here
        answered(module.status(record, sidecar), cannot)  # a job that ended: is it the engine?
        say(f"{job_id}: its output could not be read ({how})")
        return EXIT_INVALID  # as for a log that is gone: it says nothing of how the job ended
    if ended is None or ended.state == COMPLETE:
        return EXIT_OK
    say(f"{job_id} ended {ended.state}" + (f" ({ended.err_class})" if ended.err_class else ""))
    return EXIT_JOB_FAILED


def _ended(ledger: Ledger, job_id: str, attempts: int = 10) -> Status:
    """The job's terminal state once its output has ended (the backend may need a moment to
    say so); else what its backend last said (at once when it did not answer)."""
    record = ledger.get(job_id)
    for attempt in range(attempts):
        record, found = poll(record, ledger)
        if record.terminal_state is not None:
            return Status(record.terminal_state, "", err_class=record.err_class)
        if found.terminal or found.unreachable:
            return found
        if attempt + 1 < attempts:
            time.sleep(0.5)
    return found


def _stopped_following(job_id: str, why: str, now: Status) -> NoReturn:
    """Refuse (exit 2) a follow that stopped before the job ended: what stopped answering
    (the backend, else ``why``), that the job may still be running, and how to go on."""
    stopped = f"stopped following the output of {job_id}"
    again = f"the job may still be running: taospec logs -f {job_id} follows it again"
    answered(now, stopped, then=again)
    raise InvalidInput(f"{stopped}: {why} while the job is {now.state}; {again}")


def cancel(job_id: str) -> int:
    """Stop the job and record CANCELED; a job that already ended is recorded as it ended."""

    ledger, record, _ = ledger_for(job_id)
    done = cancel_job(record, ledger, progress=say)
    record = done.record
    if done.stopped:
        print(f"{job_id} {record.state} ({done.note})")
    elif done.leftover:
        print(redacted(f"{job_id} already ended {record.state}, {done.leftover}"))
    else:
        detail = f" ({done.note})" if done.note else ""
        print(redacted(f"{job_id} already ended {record.state}{detail}; nothing to cancel"))
    return EXIT_OK


def show(job_id: str, *, plan: bool = False, as_json: bool = False) -> int:
    """Print the job's record as JSON, or with ``plan`` the commands it ran (``as_json``:
    the stored plan as JSON)."""
    ledger, record, sidecar = ledger_for(job_id)
    if not plan:
        data = {**record.to_json(), "state": record.state}
        latest = progress.of_results(record.results_dir, record.action)
        if latest is not None:
            data["progress"] = progress.to_json(latest)
        chosen = sidecar.get("gpus_chosen")
        if chosen:
            data["gpus_chosen"] = chosen
        chain = retrying.chain(ledger, record)
        if len(chain) > 1:
            data["retried_by"] = [r.id for r in retrying.retried_by(ledger, record.id)]
            data["retry_chain"] = [r.id for r in chain]
        print(json.dumps(ledger.redacted(data), indent=2))
        if len(chain) > 1:
            _say_chain(ledger, record, chain)
        return EXIT_OK
    stored = stored_plan(job_id, sidecar)
    if as_json:
        print(json.dumps(shown_data(stored), indent=2))
        return EXIT_OK
    print(redacted(plantext.text(plan_from_json(stored))), end="")
    return EXIT_OK


def _say_chain(ledger: Ledger, record: Record, chain: list[Record]) -> None:
    """On stderr: what ``record`` retries and what retries it, then the chain, earliest first."""
    links = [f"retry of {record.retry_of}"] if record.retry_of else []
    later = retrying.retried_by(ledger, record.id)
    if later:
        links.append("retried by " + ", ".join(r.id for r in later))
    say(f"{record.id}: {'; '.join(links)}")
    say("retry chain, earliest first:")
    width = max(len(r.id) for r in chain)
    for job in chain:
        mark = "*" if job.id == record.id else " "
        state = f"{job.state} {job.err_class}" if job.err_class else job.state
        via = f"  retry of {job.retry_of}" if job.retry_of else ""
        say(f"{mark} {job.id:<{width}}  {state:<17}{via}".rstrip())
