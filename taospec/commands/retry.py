"""``taospec retry ID``: the plan job ID ran, again, as a new job whose record says
``retry_of: ID``; the old record stays as it is.

It is followed until it ends (``--detach``: only submitted, its id printed), and its end
is reacted to as its plan's reactions say, as ``taospec run`` does: an ``ERR_INFRA`` end
is retried as the plan's ``retry_max`` allows, and the plan's notifier runs once, for the
job that ends the chain.
A job that has not ended, one that COMPLETED, a chain that already holds
ten retries, a results_root that is not a folder here (``run``'s own check) and a path
its launch mounts that is gone (a moved data folder, pruned upstream results)
are refused (exit 2), before any record opens. So is a retry while another job of the
same plan is under way (``run``'s refusal, decided in the same critical section as a
launch of ``run``: :func:`taospec.pipeline.deciding`), unless ``force`` (``-B``); a retry
of the chain's own that finds one is not submitted. A job whose work is not known (launched
by a taospec that did not note it, and no later job of its fingerprint did) is refused too,
unless ``force``: whether another job of its plan is under way cannot be told. While it
waits to submit again after a submit that failed, its plan counts as under way, as a run's
does (:func:`taospec.pipeline.retry_due`).
"""

from __future__ import annotations

import functools
import os
import shlex
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from taospec import interrupts, notify, preflight, retrying
from taospec.commands.session import ledger_for, say
from taospec.errors import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_JOB_FAILED, EXIT_OK, InvalidInput
from taospec.executor import Submission, SubmitFailed, cancel_job
from taospec.fingerprint import Index
from taospec.ledger import Ledger, Record
from taospec.pipeline import (
    UNKNOWN_POLLS,
    Busy,
    age,
    busy_line,
    busy_reason,
    chain_ids,
    deciding,
    refuse_busy,
    retry_due,
    stopped_following,
)
from taospec.plan import Plan, plan_from_json
from taospec.polling import poll
from taospec.states import COMPLETE, UNKNOWN

POLL_FIRST, POLL_MAX = 0.2, 2.0


def retry(
    job_id: str, *, detach: bool = False, allow_shared_gpus: bool = False, force: bool = False
) -> int:
    """Submit the retry, then (unless ``detach``) follow it and react to its end as its
    plan says: exit 0 when the chain's last job completes. Exit 2, nothing submitted, while
    the job or (unless ``force``) another job of its plan is under way, or whether one is
    cannot be told."""
    ledger, record, sidecar = ledger_for(job_id)  # the passed values known before any write
    stored = sidecar.get("plan")
    ended = _retryable(ledger, record, stored, force=force)
    if ended is None:
        return EXIT_INVALID
    record = ended
    submit = functools.partial(_decided, ledger, forced=force, allow_shared_gpus=allow_shared_gpus)
    if detach:
        try:
            print(submit(record, own=False).id, flush=True)
        except Busy as busy:
            return _refused(job_id, busy)
        return EXIT_OK
    wanted = plan_from_json(stored).retry_max if isinstance(stored, dict) else 0
    first_wait, wait = retrying.backoff_first(os.environ), 0.0
    current: Record | None = None
    failed: SubmitFailed | None = None
    due: AbstractContextManager[None] = nullcontext()
    try:
        while True:
            try:
                with due:  # noted while it waits, as run notes it: no run starts the plan then
                    time.sleep(wait)
                    current, failed = submit(record, own=current is not None), None
            except SubmitFailed as error:  # recorded ERROR at its submit
                current, failed = error.record, error
            except Busy as busy:
                if current is None:
                    return _refused(job_id, busy)
                say(f"{record.id} not retried: {busy.reason}")
                break
            print(current.id, flush=True)
            if failed is None:
                current = _follow(ledger, current)
            retries = len(retrying.earlier(ledger, current))
            wait = retrying.backoff(retries + 1, first_wait) if failed else 0.0
            if not _retrying(ledger, current, wanted, retries, submitting=bool(failed), wait=wait):
                break
            due = _waiting(ledger, current) if failed else nullcontext()
            record = current
    except KeyboardInterrupt:
        interrupts.hold()
        if current is not None and ledger.get(current.id).terminal_state is None:
            ended = cancel_job(ledger.get(current.id), ledger, reason="interrupted").record
            say(f"{ended.id}: {ended.state} (interrupted)")
            _notify(ledger, ended)
        return EXIT_INTERRUPTED
    _notify(ledger, current)
    if failed is not None:
        raise failed
    say(f"{current.id}: {current.state}" + (f" {current.err_class}" if current.err_class else ""))
    return EXIT_OK if current.state == COMPLETE else EXIT_JOB_FAILED


def _retryable(ledger: Ledger, record: Record, stored: object, *, force: bool) -> Record | None:
    """The job as it is now, asked of its platform if it had not ended (it may have, since
    anyone last asked); None, said as ``run`` says it, if it has not, and (unless ``force``)
    when the work it ran is not known: whether another job of its plan is under way cannot be
    told then. What this environment lacks to retry it is refused (:func:`_refuse_missing`)."""
    if record.terminal_state is None:
        record, status = poll(record, ledger)
        if record.terminal_state is None:
            say(f"{record.id}: {busy_line(busy_reason(record, status), record.id)}")
            say("nothing was run: retry it once it has ended")
            return None
    _refuse_missing(record, stored)
    if force or not isinstance(stored, dict) or Index(ledger).work_of(record.id) is not None:
        return record  # without a stored plan, resubmit refuses it
    again = shlex.join(["taospec", "retry", "-B", record.id])
    say(
        f"{record.id}: launched by a taospec that did not note which plan's work it ran, so "
        "whether another job of that plan is under way cannot be told"
    )
    say(f"nothing was run: `{again}` retries it without that check")
    return None


def _refuse_missing(record: Record, stored: object) -> None:
    """Refuse, before a record opens, a retry of a job that passes a variable this
    environment does not set, or whose results folder cannot be made here."""
    names = stored.get("secrets", []) if isinstance(stored, dict) else []
    missing = [str(n) for n in names if str(n) not in os.environ]
    if missing and record.platform != "brev":
        raise InvalidInput(
            f"{record.id} passes {', '.join(missing)} by name, but this environment does not "
            "set it; export it before retrying (the value is never written down)"
        )
    if isinstance(stored, dict):  # else resubmit refuses it: no stored plan
        plan = plan_from_json(stored)
        _refuse_results_root(record.id, plan)
        _refuse_absent(record.id, plan)


def _decided(
    ledger: Ledger, record: Record, *, own: bool, forced: bool, allow_shared_gpus: bool
) -> Record:
    """Submit ``record``'s retry, deciding as a launch of ``run`` does, in the critical section
    of its work (:func:`taospec.pipeline.deciding`), that no job of its plan is under way
    (:class:`~taospec.pipeline.Busy`; ``forced``: not asked for the retry asked for). ``own``:
    a retry of the chain's own, which its earlier jobs do not keep from starting. A job whose
    work is not known (one launched by a taospec that did not note it; retried only when
    ``forced``, and its chain) is submitted without that look."""
    index = Index(ledger)
    work = index.work_of(record.id)
    if work is None:
        return _resubmit(ledger, record, allow_shared_gpus=allow_shared_gpus).record
    digest = ledger.sidecar(record.id).get("fingerprint")
    with deciding(index, work) as opened:
        if own or not forced:
            besides = chain_ids(ledger, record) if own else frozenset()
            refuse_busy(
                record.id, index, work, digest if isinstance(digest, str) else None, besides
            )
        return _resubmit(ledger, record, allow_shared_gpus=allow_shared_gpus, opened=opened).record


def _waiting(ledger: Ledger, record: Record) -> AbstractContextManager[None]:
    """The note that this retry waits to submit ``record`` (whose submit failed) again, as a
    run notes it (:func:`taospec.pipeline.retry_due`); none when its work is not known."""
    work = Index(ledger).work_of(record.id)
    return nullcontext() if work is None else retry_due(record.id, ledger, record, work)


def _resubmit(ledger: Ledger, record: Record, **options: Any) -> Submission:
    return retrying.resubmit(ledger, record, progress=say, **options)


def _refused(job_id: str, busy: Busy) -> int:
    """Say, as ``run`` does, which job of the plan is under way, how to follow or stop it,
    and how to start another anyway."""
    again = shlex.join(["taospec", "retry", "-B", job_id])
    say(f"{job_id}: {busy_line(busy.reason, busy.job_id)}")
    say(f"nothing was run: retry it once that job has ended, or `{again}` to start another")
    return EXIT_INVALID


def _retrying(
    ledger: Ledger, record: Record, wanted: int, retries: int, *, submitting: bool, wait: float
) -> bool:
    """Whether the plan's ``retry: {max}`` (``wanted``) has ``record``, which ended (or whose
    submit failed), retried, as ``taospec run`` would: says so either way."""
    if not wanted or not retrying.retryable(record):
        return False
    how = f"{record.id} ended ERROR ERR_INFRA" + (" while submitting" if submitting else "")
    if retries >= wanted:
        say(f"{how}; no retries left (max {wanted})")
        return False
    if retrying.full(ledger, record):
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
        fix = preflight.unusable_root_fix(root, retry=True)
        raise InvalidInput(f"{job_id}: {why}, and a retry makes its own there: {fix}, then retry")


def _refuse_absent(job_id: str, plan: Plan) -> None:
    """Refuse, before a record opens, a retry whose launch mounts a path of this machine that
    is gone (a data folder moved, the upstream results of a pipeline target pruned): ``run``
    refuses such a job file, and the retry runs the stored plan, which names it still."""
    absent = preflight.stored_launch_absent(plan)
    if not absent:
        return
    said = [
        f"{a.path} ({a.option}) cannot be looked up on this machine ({a.found})"
        if a.found
        else f"{a.path} ({a.option}) does not exist on this machine, and {a.docker}"
        for a in absent
    ]
    raise InvalidInput(
        f"{job_id}: its plan needs what is not here: {'; '.join(said)}. A retry runs the "
        "plan as it was stored: restore it and retry, or run the job file again"
    )


def _follow(ledger: Ledger, record: Record) -> Record:
    """Poll until the job ends; a backend that keeps answering UNKNOWN (an engine that
    stopped answering) stops the follow (exit 2), as it stops ``run``'s."""
    delay = POLL_FIRST
    unknown = 0
    while record.terminal_state is None:
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
        record, status = poll(record, ledger)
        unknown = unknown + 1 if status.state == UNKNOWN else 0
        if record.terminal_state is None and unknown >= UNKNOWN_POLLS:
            raise InvalidInput(stopped_following(record.id, status))
    return record
