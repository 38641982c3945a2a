"""Retries: the same plan again as a new job whose record names the one it retries.

A retry never rewrites history: the failed job keeps its record, and the new
one carries ``retry_of``. :func:`chain` reads a job's whole chain back, earliest
first. ``taospec retry ID`` and the automatic retries of ``retry: {max: N}``
both go through :func:`resubmit`, which refuses a job that has not ended, one
that completed, and a chain that already holds :data:`MAX_CHAIN` retries. A
submit that failed waits :func:`backoff` before its retry: whatever failed
(an engine restarting, an instance booting) gets a moment to recover.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime

from taospec import settings
from taospec.diagnose import INFRA
from taospec.errors import InvalidInput
from taospec.executor import Progress, Submission, claimed_gpus, submit
from taospec.fingerprint import Index
from taospec.ledger import Ledger, Record
from taospec.ledger.record import instant
from taospec.plan import plan_from_json, stored_plan
from taospec.states import COMPLETE, ERROR

MAX_CHAIN = 10
"""Retries one chain holds at most, however they were asked for."""
CARRIED = ("spec", "target", "taospec", "fingerprint")
"""Sidecar notes a retry keeps from the job it retries (what it is a run of), with its
``work`` (:meth:`~taospec.fingerprint.Index.work_of`)."""
BACKOFF_FIRST = settings.SECONDS[settings.SUBMIT_BACKOFF].default
"""Seconds before the first retry of a failed submit; each further retry waits twice as long."""
BACKOFF_MAX = 60.0
"""The longest wait between two submits (unless the first wait is set longer)."""


def backoff_first(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds before the first retry of a failed submit: ``$TAOSPEC_SUBMIT_BACKOFF``, else 5."""
    return settings.seconds(settings.SUBMIT_BACKOFF, environ)


def backoff(retry: int, first: float = BACKOFF_FIRST) -> float:
    """The wait before retry number ``retry`` (1, 2, ...) of a failed submit: ``first``,
    doubled for each retry after the first, never more than :data:`BACKOFF_MAX` (or
    ``first``, when that is longer)."""
    return min(first * 2.0 ** (retry - 1), max(first, BACKOFF_MAX))


def earlier(ledger: Ledger, record: Record) -> list[Record]:
    """The jobs ``record`` retries, directly or not, earliest first."""
    found: list[Record] = []
    seen = {record.id}
    current = record
    while current.retry_of and current.retry_of not in seen:
        seen.add(current.retry_of)
        current = ledger.get(current.retry_of)
        found.append(current)
    return found[::-1]


def retried_by(ledger: Ledger, job_id: str) -> list[Record]:
    """The jobs that retry ``job_id`` directly, oldest first."""
    return sorted((r for r in ledger.list() if r.retry_of == job_id), key=_submitted)


def later(ledger: Ledger, job_id: str) -> list[Record]:
    """The jobs that retry ``job_id``, directly or not, earliest first (the ledger is read
    once)."""
    by_parent: dict[str, list[Record]] = {}
    for found in ledger.list():
        if found.retry_of:
            by_parent.setdefault(found.retry_of, []).append(found)
    out: list[Record] = []
    seen = {job_id}
    frontier = [job_id]
    while frontier:
        for child in by_parent.get(frontier.pop(0), []):
            if child.id not in seen:
                seen.add(child.id)
                out.append(child)
                frontier.append(child.id)
    return sorted(out, key=_submitted)


def _submitted(record: Record) -> datetime:
    return instant(record.submitted_at)


def chain(ledger: Ledger, record: Record) -> list[Record]:
    """Every job of ``record``'s chain, earliest first."""
    return [*earlier(ledger, record), record, *later(ledger, record.id)]


def full(ledger: Ledger, record: Record) -> bool:
    """Whether ``record``'s chain holds :data:`MAX_CHAIN` retries, however they branch: the
    retries of its first job, not only those ``record`` descends from."""
    first = (earlier(ledger, record) or [record])[0]
    return len(later(ledger, first.id)) >= MAX_CHAIN


def retryable(record: Record) -> bool:
    """An infrastructure failure: a retry may cure it (a program failure would repeat)."""
    return record.state == ERROR and record.err_class == INFRA


def check(ledger: Ledger, record: Record) -> None:
    """Refuse to retry a job that has not ended, one that completed, or a full chain."""
    if record.terminal_state is None:
        raise InvalidInput(
            f"{record.id} has not ended ({record.state}); wait for it, or cancel it first"
        )
    if record.state == COMPLETE:
        raise InvalidInput(f"{record.id} COMPLETED; there is nothing to retry")
    if full(ledger, record):
        first = (earlier(ledger, record) or [record])[0]
        raise InvalidInput(
            f"the chain of {record.id} (from {first.id}) already holds {MAX_CHAIN} retries, "
            f"the most a chain holds (taospec show {record.id} lists them)"
        )
    stored_plan(record.id, ledger.sidecar(record.id))


def resubmit(
    ledger: Ledger,
    record: Record,
    *,
    allow_shared_gpus: bool = False,
    progress: Progress = lambda _: None,
    on_running: Callable[[Record], None] = lambda _: None,
    stopping: Callable[[], bool] = lambda: False,
    opened: Callable[[Record], None] = lambda _: None,
) -> Submission:
    """Submit ``record``'s stored plan as a new job with ``retry_of``, checked by :func:`check`,
    under the same GPU lock and overlap check as a first submit (``stopping``, ``opened``: as
    for :func:`taospec.executor.submit`). The new job stands for the fingerprint of the one
    it retries from its open on, so that a run of the same plan sees it being launched."""
    check(ledger, record)
    side = ledger.sidecar(record.id)
    plan = plan_from_json(stored_plan(record.id, side)).with_placeholder_id()
    index = Index(ledger)
    work = index.work_of(record.id)
    carried = {key: side[key] for key in CARRIED if key in side}
    if work is not None:
        carried["work"] = work
    target, fingerprint = carried.get("target"), carried.get("fingerprint")

    claim = claimed_gpus(plan, ledger, allow_shared=allow_shared_gpus, progress=progress)
    with claim as (claimed, notes, claimed_by_record):

        def noted(new: Record) -> None:
            claimed_by_record()
            if isinstance(target, str) and isinstance(fingerprint, str):
                index.retried(target, new.id, fingerprint, work)
            opened(new)

        return submit(
            claimed,
            ledger,
            sidecar={**carried, **notes},
            progress=progress,
            on_running=on_running,
            retry_of=record.id,
            stopping=stopping,
            opened=noted,
        )
