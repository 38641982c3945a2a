"""``taospec status``: a job's state, from its backend while it runs, from its record after.

A job that has ended keeps its terminal state in the ledger (terminal states never
change), and the poll that recorded it noted the exit code in the sidecar. So a
finished job's status reads two files and asks no backend: it answers when the
Docker host, the Brev instance or the cluster is gone, and it loads no platform.
Only a job still running (or one recorded before exit codes were noted) is polled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from taospec import progress
from taospec.commands.session import ledger_for, shown_data
from taospec.errors import EXIT_OK
from taospec.ledger import Record
from taospec.lint import redacted
from taospec.states import ERROR, Status, answered


def status(job_id: str, *, as_json: bool = False) -> int:
    """Print the job's state; a poll of a running job records a first terminal state."""

    ledger, record, sidecar = ledger_for(job_id)
    found = _recorded(record, sidecar)
    if found is None:
        # A job that may still change: its platform (and with it the renderers) loads here.
        from taospec.polling import poll

        record, found = poll(record, ledger)
        answered(found, f"cannot tell the state of {job_id}")
    err_class = record.err_class if found.state == ERROR else None
    latest = progress.of_results(record.results_dir, record.action)
    if as_json:
        data: dict[str, object] = {
            "id": record.id,
            "state": found.state,
            "message": found.message,
            "exit_code": found.exit_code,
            "recorded_state": record.state,
            "err_class": err_class,
            "backend_ref": record.backend_ref,
            "platform": record.platform,
        }
        if latest is not None:
            data["progress"] = progress.to_json(latest)
        print(json.dumps(shown_data(data)))
    else:
        state = f"{found.state} {err_class}" if err_class else found.state
        print(redacted(f"{record.id} {state} {found.message}"))
        if latest is not None and progress.describe(latest):
            print(redacted(f"  progress: {progress.describe(latest)}"))
    return EXIT_OK


def _recorded(record: Record, sidecar: Mapping[str, object]) -> Status | None:
    """A finished job's status as recorded; None when the backend must be asked (a job
    still running, or one that ended before taospec noted exit codes)."""
    if record.terminal_state is None or "exit_code" not in sidecar:
        return None
    noted = sidecar["exit_code"]
    if isinstance(noted, bool) or not isinstance(noted, int | None):
        return None
    message = record.transitions[-1].message if record.transitions else ""
    return Status(record.terminal_state, message, noted, err_class=record.err_class)
