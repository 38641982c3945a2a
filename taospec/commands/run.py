"""``taospec run``: submit a job, then follow it until it ends."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from taospec import __version__, plantext
from taospec.commands import open_ledger, say
from taospec.errors import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK
from taospec.executor import (
    check_environment,
    check_gpus,
    poll,
    secret_values,
    submit,
    teardown,
)
from taospec.jobstate import CANCELED, COMPLETE
from taospec.plan import render
from taospec.platforms import platform_module
from taospec.proc import redacted
from taospec.spec import load_job

if TYPE_CHECKING:
    from taospec.ledger import Ledger, Record

POLL_FIRST, POLL_MAX = 0.2, 2.0
TAIL_LINES = 20


def run(
    file: str,
    *,
    detach: bool = False,
    dry_run: bool = False,
    follow: bool = False,
    user: str | None = None,
    allow_shared_gpus: bool = False,
) -> int:
    """Render ``file``; with ``dry_run`` print it, else submit and follow the job."""
    plan = render(load_job(file), user=user)
    if dry_run:
        print(plantext.text(plan), end="")
        return EXIT_OK
    check_environment(plan, os.environ)
    ledger = open_ledger(secret_values(plan.secrets))
    if not allow_shared_gpus:
        check_gpus(plan, ledger)
    sidecar = {"spec": file, "target": plan.target, "taospec": __version__}
    submission = submit(plan, ledger, sidecar=sidecar, progress=say)
    if detach:
        print(submission.record.id)
        return EXIT_OK
    return follow_job(submission.record, ledger, logs=follow)


def follow_job(record: Record, ledger: Ledger, *, logs: bool) -> int:
    """Wait for ``record``'s job to end; Ctrl-C cancels it. Exit 0 only on COMPLETE."""
    try:
        if logs:
            module = platform_module(record.platform)
            module.logs(
                record,
                ledger.sidecar(record.id),
                tail=None,
                follow=True,
                on_line=lambda line: print(redacted(line), end="", flush=True),
            )
        record = _wait(record, ledger)
    except KeyboardInterrupt:
        return _cancel_on_interrupt(record, ledger)
    return _report(record, ledger)


def _wait(record: Record, ledger: Ledger) -> Record:
    delay = POLL_FIRST
    last = record.state
    while True:
        record, status = poll(record, ledger)
        if status.state != last:
            say(f"{record.id}: {status.state} ({status.message})")
            last = status.state
        if record.terminal_state is not None:
            return record
        if status.state == "UNKNOWN" and record.backend_ref is not None:
            return record
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


def _report(record: Record, ledger: Ledger) -> int:
    state = record.state
    print(f"{record.id} {state}")
    if state == COMPLETE:
        return EXIT_OK
    tail = platform_module(record.platform).log_tail(record, ledger.sidecar(record.id), TAIL_LINES)
    if tail.strip():
        say(f"last lines of {record.id}'s output:")
        for line in tail.rstrip("\n").splitlines():
            say(f"  | {line}")
    say(f"{record.id}: {record.transitions[-1].message}")
    return EXIT_JOB_FAILED


def _cancel_on_interrupt(record: Record, ledger: Ledger) -> int:
    say(f"{record.id}: interrupted; cancelling the job")
    current = ledger.get(record.id)
    if current.terminal_state is None:
        note = platform_module(current.platform).cancel(current, ledger.sidecar(current.id))
        teardown(ledger.mark(current.id, CANCELED, message=f"interrupted; {note}"), ledger, say)
    print(f"{record.id} {CANCELED}", file=sys.stdout)
    return EXIT_INTERRUPTED
