"""Asking a backend about a job, and writing down what it says.

:func:`poll` is what ``taospec status`` and a build following its jobs do:
ask the job's platform, heal a RUNNING mark a crash lost, and record the first
terminal state (then run the plan's teardown). It imports the platform and,
only when a job has just ended, the executor's teardown, so asking about a
finished job loads neither plans nor processes.
"""

from __future__ import annotations

from taospec import platforms
from taospec.executor import teardown
from taospec.ledger import Ledger, Record
from taospec.states import RUNNING, Status


def poll(record: Record, ledger: Ledger) -> tuple[Record, Status]:
    """Ask the backend, heal a lost RUNNING mark, record a first terminal state."""
    module = platforms.get(record.platform)
    sidecar = ledger.sidecar(record.id)
    status: Status = module.status(record, sidecar)
    if status.found_ref and record.backend_ref is None and record.terminal_state is None:
        record = ledger.mark(
            record.id,
            RUNNING,
            message=f"healed: found {status.found_ref} after a lost RUNNING mark",
            source="poller",
            backend_ref=status.found_ref,
        )
    if status.terminal and record.terminal_state is None:
        record = ledger.mark(
            record.id,
            status.state,
            message=status.message,
            source="poller",
            err_class=status.err_class,
        )
        teardown(record, ledger)
    return record, status
