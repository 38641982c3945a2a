"""Asking a backend about a job, and writing down what it says.

:func:`poll` is what ``taospec status`` and a build following its jobs do:
ask the job's platform, heal a RUNNING mark a crash lost, and record the first
terminal state (then run the plan's teardown). It imports the platform and,
only when a job has just ended, the executor's teardown, so asking about a
finished job loads neither plans nor processes.
"""

from __future__ import annotations

import time

from taospec import platforms, settings
from taospec.diagnose import INFRA
from taospec.executor import CANCEL_FAILED, SUBMITTER, cancel_began, launch_alive, teardown
from taospec.ledger import Ledger, Record, TerminalStateError
from taospec.ledger.record import instant
from taospec.platforms.base import EndedFirst, Platform
from taospec.states import CANCELED, COMPLETE, ERROR, PENDING, RUNNING, Status


def poll(record: Record, ledger: Ledger) -> tuple[Record, Status]:
    """Ask the backend, heal a lost mark, record a first terminal state.

    A terminal record answers with its recorded state. A job not launched yet whose
    backend object is not there is PENDING while the taospec process that opened it (or
    a launch it started) runs: its submit is still launching it (a pull, say). A job
    whose backend object is confirmed gone is closed: CANCELED when a cancel had begun,
    else ERROR (ERR_INFRA) once it was launched, or once it is older than
    ``$TAOSPEC_LAUNCH_GRACE`` seconds (120) with neither the taospec process that opened it
    nor a launch it started running; so is a stalled object (a created container nobody
    started), removed first, past that grace. An
    end other than COMPLETE while a cancel had begun is that cancel's: CANCELED, unless
    that cancel failed with the job still running: the job's end is then its own. An end
    another writer of the ledger recorded first is the job's end, as terminal states are
    immutable.
    """
    module = platforms.get(record.platform)
    sidecar = ledger.sidecar(record.id)
    status: Status = module.status(record, sidecar)
    if record.terminal_state is not None:
        if status.state != record.terminal_state:
            last = record.transitions[-1].message if record.transitions else ""
            status = Status(record.terminal_state, last, err_class=record.err_class)
        return record, status
    if status.found_ref and record.backend_ref is None:
        state = PENDING if status.state == PENDING else RUNNING
        record = ledger.mark(
            record.id,
            state,
            message=f"healed: found {status.found_ref} ({status.message}) after a lost mark",
            source="poller",
            backend_ref=status.found_ref,
        )
    if status.gone:
        status = _closed(record, sidecar, status)
    elif status.stalled and record.state == PENDING:
        abandoned = _abandoned(record, sidecar, status)
        status = _cleared(module, record, sidecar, abandoned) if abandoned else status
    elif status.terminal and status.state != COMPLETE and cancel_began(sidecar):
        # the end a cancel under way brought about (docker kill: exit 137), not the job's own
        status = Status(CANCELED, _cancelled(cancel_began(sidecar), status))
    elif status.terminal and sidecar.get(CANCEL_FAILED):
        failed = f"{status.message}; an earlier cancel failed at {sidecar[CANCEL_FAILED]}"
        status = status._replace(message=failed)
    if status.terminal:
        try:
            record = ledger.mark(
                record.id,
                status.state,
                message=status.message,
                source="poller",
                err_class=status.err_class,
            )
        except TerminalStateError:  # another writer (an agent's recorder) recorded an end first
            record = ledger.get(record.id)
            last = record.transitions[-1].message
            status = Status(record.state, last, status.exit_code, record.err_class)
        # What only the backend knew, kept for `status` once the backend object is gone.
        ledger.update_sidecar(record.id, exit_code=status.exit_code)
        teardown(record, ledger)
    return record, status


def _closed(record: Record, sidecar: dict[str, object], status: Status) -> Status:
    """What a job whose backend object is gone ended as (unchanged while that is unclear)."""
    began = cancel_began(sidecar)
    if began:
        return Status(CANCELED, _cancelled(began, status))
    launched = record.backend_ref is not None or record.state == RUNNING
    if launched:
        return Status(ERROR, status.message, err_class=INFRA)
    abandoned = _abandoned(record, sidecar, status)
    if abandoned:
        return Status(ERROR, abandoned, err_class=INFRA)
    if launch_alive(sidecar.get(SUBMITTER), record.id):
        return Status(PENDING, f"{status.message}; its submit is still launching it")
    return status


def _cleared(
    module: Platform, record: Record, sidecar: dict[str, object], abandoned: str
) -> Status:
    """The end of a launch that stalled with nothing left to finish it: what it left (a
    container created and never started) is removed first, so nothing can start it later."""
    try:
        removed = module.cancel(record, sidecar)
    except EndedFirst as ended:  # it was started after all, and has ended
        return ended.status
    return Status(ERROR, f"{abandoned}; {removed}", err_class=INFRA)


def _cancelled(began: object, status: Status) -> str:
    """The message of an end a cancel brought about: what the backend saw, without the
    diagnosis it would give a job that ended on its own (a kill from outside)."""
    return f"a cancel began at {began}; {status.message.split('; ', 1)[0]}"


def _abandoned(record: Record, sidecar: dict[str, object], status: Status) -> str | None:
    """Why a job never launched, once it is older than ``$TAOSPEC_LAUNCH_GRACE`` seconds and
    neither the taospec process that opened it nor a launch it started runs
    (:func:`~taospec.executor.launch_alive`; None while its launch may still come)."""
    age = time.time() - instant(record.submitted_at).timestamp()
    grace = settings.seconds(settings.LAUNCH_GRACE)
    if (
        SUBMITTER in sidecar
        and age > grace
        and launch_alive(sidecar[SUBMITTER], record.id) is False
    ):
        return (
            f"{status.message}; never launched: the taospec process that opened the record "
            f"{int(age)} s ago is gone, and so is any launch it started"
        )
    return None
