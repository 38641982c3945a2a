"""The verbs on a submitted job: ``status``, ``logs``, ``cancel``, ``show`` and ``ls``."""

from __future__ import annotations

import json
import os

from taospec import plantext, platforms
from taospec.commands import open_ledger, say
from taospec.errors import EXIT_OK
from taospec.executor import cancel_job
from taospec.ledger import Ledger, Record
from taospec.plan import plan_from_json
from taospec.polling import poll
from taospec.proc import redacted

# Each verb imports what only it needs: ``ls`` reads the ledger and nothing else.


def _ledger_for(job_id: str) -> tuple[Ledger, Record]:
    """The ledger, redacting the values of the job's passed variables, and the record."""
    ledger = open_ledger()
    record = ledger.get(job_id)
    plan = ledger.sidecar(job_id).get("plan")
    names = plan.get("secrets", []) if isinstance(plan, dict) else []
    values = [os.environ[n] for n in names if isinstance(n, str) and os.environ.get(n)]
    if values:
        ledger = open_ledger(values)
    return ledger, record


def status(job_id: str, *, as_json: bool = False) -> int:
    """Poll the backend and print the job's state; records a first terminal state."""

    ledger, record = _ledger_for(job_id)
    record, found = poll(record, ledger)
    if as_json:
        data = {
            "id": record.id,
            "state": found.state,
            "message": found.message,
            "exit_code": found.exit_code,
            "recorded_state": record.state,
            "backend_ref": record.backend_ref,
            "platform": record.platform,
        }
        print(redacted(json.dumps(data)))
    else:
        print(redacted(f"{record.id} {found.state} {found.message}"))
    return EXIT_OK


def logs(job_id: str, *, tail: int | None = None, follow: bool = False) -> int:
    """Print the job's output (redacted); with ``follow``, until the job ends."""

    ledger, record = _ledger_for(job_id)
    if record.terminal_state is None:
        record, _ = poll(record, ledger)  # heals a mark a failed write lost
    module = platforms.get(record.platform)
    module.logs(
        record,
        ledger.sidecar(job_id),
        tail=tail,
        follow=follow,
        on_line=lambda line: print(redacted(line), end="", flush=True),
    )
    return EXIT_OK


def cancel(job_id: str) -> int:
    """Stop the job and record CANCELED; a job that already ended is recorded as it ended."""

    ledger, record = _ledger_for(job_id)
    done = cancel_job(record, ledger, progress=say)
    record = done.record
    if done.stopped:
        print(f"{job_id} {record.state} ({done.note})")
    else:
        detail = f" ({done.note})" if done.note else ""
        print(redacted(f"{job_id} already ended {record.state}{detail}; nothing to cancel"))
    return EXIT_OK


def show(job_id: str, *, plan: bool = False, as_json: bool = False) -> int:
    """Print the job's record as JSON, or with ``plan`` the commands it ran (``as_json``:
    the stored plan as JSON)."""
    ledger, record = _ledger_for(job_id)
    if not plan:
        print(json.dumps({**record.to_json(), "state": record.state}, indent=2))
        return EXIT_OK
    stored = ledger.sidecar(job_id).get("plan")
    if not isinstance(stored, dict):
        say(f"{job_id} has no stored plan (it was not submitted by taospec run)")
        return EXIT_OK
    if as_json:
        print(redacted(json.dumps(stored, indent=2)))
        return EXIT_OK
    print(plantext.text(plan_from_json(stored)), end="")
    return EXIT_OK


def ls(*, state: str | None = None, limit: int | None = 20, as_json: bool = False) -> int:
    """The newest records (recorded states; ``status`` asks the backend)."""
    records = open_ledger().list(state=state, limit=limit)
    if as_json:
        for record in records:
            print(json.dumps({**record.to_json(), "state": record.state}))
        return EXIT_OK
    rows = [("ID", "STATE", "PLATFORM", "SUBMITTED", "RESULTS")]
    rows += [
        (r.id, r.state, r.platform, r.submitted_at[:19].replace("T", " "), r.results_dir)
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return EXIT_OK
