"""``taospec retry ID``: the plan job ID ran, again, as a new job whose record says
``retry_of: ID``; the old record stays as it is.

It is followed until it ends (``--detach``: only submitted, its id printed).
A job that has not ended, one that COMPLETED, a chain that already holds
ten retries, and a results_root that is not a folder here (``run``'s own check)
are refused (exit 2), before any record opens.
"""

from __future__ import annotations

import os
import time

from taospec import interrupts, preflight, retrying
from taospec.commands.session import ledger_for, say
from taospec.errors import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK, InvalidInput
from taospec.executor import cancel_job
from taospec.ledger import Ledger, Record
from taospec.plan import Plan, plan_from_json
from taospec.polling import poll
from taospec.states import COMPLETE

POLL_FIRST, POLL_MAX = 0.2, 2.0


def retry(job_id: str, *, detach: bool = False, allow_shared_gpus: bool = False) -> int:
    """Submit the retry, then (unless ``detach``) follow it: exit 0 when it completes."""
    ledger, record, sidecar = ledger_for(job_id)  # the passed values known before any write
    if record.terminal_state is None:
        record, _ = poll(record, ledger)  # it may have ended since anyone last asked
    stored = sidecar.get("plan")
    names = stored.get("secrets", []) if isinstance(stored, dict) else []
    missing = [str(n) for n in names if str(n) not in os.environ]
    if missing and record.platform != "brev":
        raise InvalidInput(
            f"{job_id} passes {', '.join(missing)} by name, but this environment does not set "
            "it; export it before retrying (the value is never written down)"
        )
    if isinstance(stored, dict):  # else resubmit refuses it: no stored plan
        _refuse_results_root(job_id, plan_from_json(stored))
    done = retrying.resubmit(ledger, record, allow_shared_gpus=allow_shared_gpus, progress=say)
    print(done.record.id, flush=True)
    if detach:
        return EXIT_OK
    try:
        ended = _follow(ledger, done.record)
    except KeyboardInterrupt:
        interrupts.hold()
        cancel_job(ledger.get(done.record.id), ledger, reason="interrupted")
        return EXIT_INTERRUPTED
    say(f"{ended.id}: {ended.state}" + (f" {ended.err_class}" if ended.err_class else ""))
    return EXIT_OK if ended.state == COMPLETE else EXIT_JOB_FAILED


def _refuse_results_root(job_id: str, plan: Plan) -> None:
    """Refuse, before a record opens, a retry whose results folder cannot be made here: the
    check ``run`` makes, on the folder the stored plan makes its results folder in."""
    root = plan.record.results_dir.rpartition("/")[0] or "/"
    why = preflight.results_root_unusable(
        plan.platform,
        plan.backend_value("docker_host") or plan.backend_value("docker_context"),
        root,
    )
    if why:
        raise InvalidInput(
            f"{job_id}: {why}, and a retry makes its own there: move what is there, then retry"
        )


def _follow(ledger: Ledger, record: Record) -> Record:
    delay = POLL_FIRST
    while record.terminal_state is None:
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
        record, _ = poll(record, ledger)
    return record
