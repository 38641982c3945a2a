"""``taospec retry ID``: the plan job ID ran, again, as a new job whose record says
``retry_of: ID``; the old record stays as it is.

It is followed until it ends (``--detach``: only submitted, its id printed), and its end
is reacted to as its plan's reactions say, as ``taospec run`` does: an ``ERR_INFRA`` end
is retried as the plan's ``retry_max`` allows, and the plan's notifier runs once, for the
job that ends the chain.
A job that has not ended, one that COMPLETED, a chain that already holds
ten retries, and a results_root that is not a folder here (``run``'s own check)
are refused (exit 2), before any record opens.
"""

from __future__ import annotations

import functools
import os
import time

from taospec import interrupts, notify, preflight, retrying
from taospec.commands.session import ledger_for, say
from taospec.errors import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK, InvalidInput
from taospec.executor import SubmitFailed, cancel_job
from taospec.ledger import Ledger, Record
from taospec.pipeline import age
from taospec.plan import Plan, plan_from_json
from taospec.polling import poll
from taospec.states import COMPLETE

POLL_FIRST, POLL_MAX = 0.2, 2.0


def retry(job_id: str, *, detach: bool = False, allow_shared_gpus: bool = False) -> int:
    """Submit the retry, then (unless ``detach``) follow it and react to its end as its
    plan says: exit 0 when the chain's last job completes."""
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
    submit = functools.partial(
        retrying.resubmit, ledger, allow_shared_gpus=allow_shared_gpus, progress=say
    )
    if detach:
        print(submit(record).record.id, flush=True)
        return EXIT_OK
    wanted = plan_from_json(stored).retry_max if isinstance(stored, dict) else 0
    first_wait = retrying.backoff_first(os.environ)
    current: Record | None = None
    try:
        while True:
            failed: SubmitFailed | None = None
            try:
                current = submit(record).record
            except SubmitFailed as error:  # recorded ERROR at its submit
                current, failed = error.record, error
            print(current.id, flush=True)
            if failed is None:
                current = _follow(ledger, current)
            retries = len(retrying.earlier(ledger, current))
            wait = retrying.backoff(retries + 1, first_wait) if failed else 0.0
            if not _retrying(current, wanted, retries, submitting=bool(failed), wait=wait):
                break
            time.sleep(wait)
            record = current
    except KeyboardInterrupt:
        interrupts.hold()
        if current is not None and ledger.get(current.id).terminal_state is None:
            _notify(ledger, cancel_job(ledger.get(current.id), ledger, reason="interrupted").record)
        return EXIT_INTERRUPTED
    _notify(ledger, current)
    if failed is not None:
        raise failed
    say(f"{current.id}: {current.state}" + (f" {current.err_class}" if current.err_class else ""))
    return EXIT_OK if current.state == COMPLETE else EXIT_JOB_FAILED


def _retrying(record: Record, wanted: int, retries: int, *, submitting: bool, wait: float) -> bool:
    """Whether the plan's ``retry: {max}`` (``wanted``) has ``record``, which ended (or whose
    submit failed), retried, as ``taospec run`` would: says so either way."""
    if not wanted or not retrying.retryable(record):
        return False
    how = f"{record.id} ended ERROR ERR_INFRA" + (" while submitting" if submitting else "")
    if retries >= wanted:
        say(f"{how}; no retries left (max {wanted})")
        return False
    if retries >= retrying.MAX_CHAIN:
        say(f"{how}; its chain already holds {retrying.MAX_CHAIN} retries")
        return False
    say(f"{how}; retry {retries + 1} of {wanted}" + (f" in {wait:g}s" if wait else ""))
    return True


def _notify(ledger: Ledger, record: Record) -> None:
    """Run the notifier the job's stored plan shows, as ``taospec run`` does when it ends."""
    variables = notify.outcome(
        record.id, record.state, record.err_class, age(record), record.results_dir
    )
    problem = notify.notify(notify.planned(ledger.sidecar(record.id)), variables)
    if problem:
        say(problem)


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
