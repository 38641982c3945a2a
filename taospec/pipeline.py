"""Make-like runs: decide what is out of date, then build it in dependency order.

:func:`decide` walks the targets dependencies first and says for each one
whether it runs and why (``never run``, ``plan changed``, ``input x
changed``, ``upstream train will run``, ``results missing``), which
COMPLETE job already holds its result, or which job of the same fingerprint
is still under way (a run then starts nothing). :class:`Build` then runs what is out
of date, up to ``jobs`` targets at once, never two whose GPU ids overlap on
one host at the same time, and cancels what runs on Ctrl-C.

One job at a time per fingerprint: each launch decides again, under a lock per work
(:meth:`~taospec.fingerprint.Index.deciding`) held from that look to its record's open,
whether a job of the same fingerprint is under way (:class:`Busy`), and notes its job in
the index as soon as the record is open, before anything launches. A run holds one such
lock at a time, never across a launch.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import sys
import threading
import time
import traceback
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import KW_ONLY, dataclass, field

from taospec import __version__, identity, interrupts, notify, platforms, progress, ticker
from taospec.errors import EXIT_INTERNAL, InvalidInput, TaospecError
from taospec.executor import (
    NOT_LAUNCHED,
    SubmitFailed,
    SubmitInterrupted,
    cancel_job,
    claimed_gpus,
    launch_alive,
    recorded_first,
    submit,
    this_process,
)
from taospec.fingerprint import (
    Fingerprint,
    Index,
    compute,
    has_image_digest,
    image_digest,
    look_up_image,
    target_key,
)
from taospec.identity import Identity
from taospec.job import JobFile, Target
from taospec.ledger import Ledger, LedgerCorrupt, Record
from taospec.ledger.record import instant, now
from taospec.lint import redacted
from taospec.plan import Plan, upstream_stand_ins
from taospec.platforms import render
from taospec.polling import poll
from taospec.retrying import (
    BACKOFF_FIRST,
    MAX_CHAIN,
    backoff,
    earlier,
    full,
    resubmit,
    retryable,
)
from taospec.states import CANCELED, COMPLETE, ERROR, FAILED, PENDING, RUNNING, UNKNOWN, Status
from taospec.yamlsrc import Source

POLL_FIRST, POLL_MAX = 0.2, 2.0
UNKNOWN_POLLS = 8
"""Consecutive UNKNOWN answers before a build stops waiting for a job (about 15 s)."""
RETRY_DUE = "retry_due"
"""Sidecar note on a job whose failed submit a run (or a followed ``retry``) will submit again
after its backoff: that process (:func:`~taospec.executor.this_process`) and when it began to
wait (:func:`retry_due`)."""
INTERNAL_ERROR = "INTERNAL ERROR"
"""A target's result when taospec itself failed (exit 3: a ledger it cannot write, a bug),
which says nothing of how its job did."""


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether one target runs, and why.

    ``job_id`` and ``results_dir`` name the COMPLETE job that holds an
    up-to-date target's result. ``work`` is the fingerprint without the image,
    kept so that launching does not hash the target's inputs a second time
    (None when the target waits for an upstream or is forced). ``running`` names
    the job of the same fingerprint that has not ended, by its platform's word:
    the target is not up to date, and a run must not start it a second time.
    ``forced`` (``-B``) starts it whatever is under way.
    """

    target: Target
    run: bool
    reason: str
    plan: Plan | None
    fingerprint: Fingerprint | None = None
    job_id: str | None = None
    results_dir: str | None = None
    _: KW_ONLY
    work: Fingerprint | None = None
    running: str | None = None
    forced: bool = False


class Busy(InvalidInput):
    """A job of the same fingerprint is under way (another run launches or follows it): a
    launch refused before anything was opened."""

    def __init__(self, target: str, reason: str, job_id: str) -> None:
        super().__init__(f"{target}: {busy_line(reason, job_id)}")
        self.target, self.reason, self.job_id = target, reason, job_id


def busy_line(reason: str, job_id: str) -> str:
    """Why a target is not started, and how to follow or stop the job under way."""
    return (
        f"{reason}; follow it with `taospec logs -f {job_id}`, or stop it with "
        f"`taospec cancel {job_id}`"
    )


def decide(
    jobfile: JobFile,
    names: Sequence[str],
    ledger: Ledger,
    *,
    force: Sequence[str] = (),
    user: str | None = None,
    preview: bool = False,
    launching: bool = False,
    sources: Mapping[str, Source] | None = None,
    notifier: Sequence[str] = (),
) -> list[Decision]:
    """A decision per target in ``names`` (dependencies first).

    A target that waits for an upstream which will run has no plan yet: its
    plan needs the upstream's real results directory, known only once the
    upstream has launched. With ``preview`` (a dry run) it is rendered now with
    the ``$UPSTREAM_<TARGET>`` stand-ins, for review. With ``launching`` (a
    run that builds) it is rendered with the stand-ins too, so that whatever
    its platform refuses stops the run before anything is submitted, and is
    rendered again when it launches. Who launches is asked once, for every
    target. With each target's ``sources``, a render refusal is located at the
    key it is about. ``notifier`` (``$TAOSPEC_NOTIFY``) is in the plan of each target
    without ``notify:``, as :func:`taospec.platforms.render` puts it.
    """
    index = Index(ledger)
    asked: dict[str, str | None] = {}  # image ids, by engine and image
    decided: dict[str, Decision] = {}
    launcher = identity.launcher()
    for name in names:
        target = jobfile.targets[name]
        decided[name] = _decide_one(
            target,
            decided,
            index,
            asked,
            forced=name in force,
            user=user,
            launcher=launcher,
            preview=preview,
            launching=launching,
            source=(sources or {}).get(name),
            notifier=notifier,
        )
    return [decided[name] for name in names]


def _decide_one(
    target: Target,
    decided: dict[str, Decision],
    index: Index,
    asked: dict[str, str | None],
    *,
    forced: bool,
    user: str | None,
    launcher: Identity,
    preview: bool,
    launching: bool,
    source: Source | None,
    notifier: Sequence[str],
) -> Decision:
    waiting = [need for need in target.needs if decided[need].run]
    if waiting:
        busy = [need for need in waiting if decided[need].running]
        first = (busy or waiting)[0]
        reason = (
            f"upstream {first}: {decided[first].reason}" if busy else f"upstream {first} will run"
        )
        if not (preview or launching):
            return Decision(target, True, reason, None)
        upstream = {**_upstream_dirs(target, decided), **upstream_stand_ins(waiting)}
        plan = render(
            target.job, user=user, launcher=launcher, upstream=upstream, source=source,
            notifier=notifier,
        )  # fmt: skip
        return Decision(target, True, reason, plan if preview else None)
    upstream = _upstream_dirs(target, decided)
    plan = render(
        target.job, user=user, launcher=launcher, upstream=upstream, source=source,
        notifier=notifier,
    )  # fmt: skip
    if forced:
        return Decision(target, True, "forced (-B)", plan, forced=True)
    needs = {need: _digest(decided[need]) for need in target.needs}
    try:
        work = compute(target, plan, needs)
    except InvalidInput as refused:
        if source is None:
            raise
        raise source.refusal(refused) from None
    if has_image_digest(plan) and not index.may_hold(work):
        # No job of this work was ever launched, on any image: it runs, and the
        # engine is asked for the image's id while it launches.
        last = index.last_launch(target_key(target)).get("fingerprint")
        changed = work.work_differences(last) if isinstance(last, dict) else ["never run"]
        if changed:
            return Decision(target, True, changed[0], plan, work=work)
    fingerprint = work.with_image(image_digest(plan, asked))
    done, later = index.standing(fingerprint)
    if done is None or later:  # a later job of this work, once its end is known, stands
        going = under_way(index, work.work_digest, fingerprint.digest)
        if going is not None:
            record, why = going
            return Decision(target, True, why, plan, fingerprint, work=work, running=record.id)
        done = index.complete_record(fingerprint)  # it may have completed since its last poll
    if done is not None:
        reason = f"up to date (job {done.id})"
        return Decision(
            target, False, reason, plan, fingerprint, done.id, done.results_dir, work=work
        )
    return Decision(target, True, _why(target, fingerprint, index), plan, fingerprint, work=work)


def stopped_following(job_id: str, status: Status) -> str:
    """Why a follow of a job stopped while its backend answered UNKNOWN (``status``), and
    how to follow it again: the job may still be running."""
    why = status.unreachable or status.message
    again = f"taospec logs -f {job_id} follows it again"
    return f"stopped following {job_id}: {why}; the job may still be running: {again}"


def under_way(
    index: Index, work: str, digest: str | None, besides: frozenset[str] = frozenset()
) -> tuple[Record, str] | None:
    """The job of this work (its digest) and fingerprint (``digest``; None while the image's
    id is not known) that has not ended, by its platform's word, and why it is busy; or one that
    ended and whose launcher waits to submit its retry. A job still under way must not be started
    a second time. An end the platform reports is recorded, as ``taospec status`` records
    it. The jobs ``besides`` (a retry's own chain) are not asked about. A job not recorded as
    ended whose record or sidecar cannot be read (edited by hand) cannot be asked:
    :class:`InvalidInput`."""
    for record in index.newest(work, digest):
        if record.id in besides:
            continue
        try:
            if record.terminal_state is None:
                record, status = poll(record, index.ledger)
                if record.terminal_state is None:
                    return record, busy_reason(record, status)
            note = index.ledger.sidecar(record.id).get(RETRY_DUE)
        except LedgerCorrupt as damaged:
            if record.terminal_state is not None:
                continue  # it ended, and no retry of it can be seen to be due
            raise InvalidInput(
                f"{damaged}: job {record.id} is recorded {record.state}, and whether it still "
                "runs cannot be told without that file: repair or move it, or run with -B to "
                "start another job"
            ) from None
        if isinstance(note, dict) and launch_alive(note, record.id):
            ended = " ".join(filter(None, (record.state, record.err_class)))
            why = f"job {record.id} ended {ended}; the taospec that launched it submits its retry"
            return record, f"{why} (pid {note.get('pid')})"
    return None


@contextmanager
def deciding(
    index: Index, work: str, noted: Callable[[Record], None] = lambda _: None
) -> Iterator[Callable[[Record], None]]:
    """Hold the lock of ``work`` (:meth:`Index.deciding`) for the block, or until the record
    of its launch opens: the callback given to the submit notes the job, then lets go, so
    the launch itself (a long pull) holds no lock of this kind."""
    with ExitStack() as held:
        with recorded_first(index.ledger, NOT_LAUNCHED):
            held.enter_context(index.deciding(work))

        def opened(record: Record) -> None:
            noted(record)
            held.close()

        yield opened


def refuse_busy(
    name: str, index: Index, work: str, digest: str | None, besides: frozenset[str] = frozenset()
) -> None:
    """:class:`Busy` (for ``name``) when a job of this work and fingerprint is under way
    (:func:`under_way`)."""
    busy = under_way(index, work, digest, besides)
    if busy is not None:
        record, why = busy
        raise Busy(name, why, record.id)


def _noted_digest(ledger: Ledger, record: Record) -> str | None:
    """The fingerprint a job's sidecar notes (None when its image's id was never known)."""
    digest = ledger.sidecar(record.id).get("fingerprint")
    return digest if isinstance(digest, str) else None


def chain_ids(ledger: Ledger, record: Record) -> frozenset[str]:
    """A job and the jobs it retries: the jobs a retry of it stands in for."""
    return frozenset({record.id, *(r.id for r in earlier(ledger, record))})


@contextmanager
def retry_due(name: str, ledger: Ledger, record: Record, work: str) -> Iterator[None]:
    """Note on ``record``, whose submit failed, that this process submits its retry after a
    wait (:data:`RETRY_DUE`), so that no launch of its ``work`` starts a job meanwhile; unless
    one is under way already (:class:`Busy`, for ``name``), as decided under the work's lock.
    The note is taken back when the block raises: no retry comes of that wait."""
    index = Index(ledger)
    with recorded_first(ledger, NOT_LAUNCHED), index.deciding(work):
        refuse_busy(name, index, work, _noted_digest(ledger, record), chain_ids(ledger, record))
        ledger.update_sidecar(record.id, **{RETRY_DUE: {**this_process(), "at": now()}})
    try:
        yield
    except BaseException:
        ledger.update_sidecar(record.id, **{RETRY_DUE: None})
        raise


def busy_reason(record: Record, status: Status) -> str:
    """Why a job that has not ended keeps its plan from being started again."""
    if status.state in (PENDING, RUNNING):
        return f"job {record.id} is still {status.state}"
    return f"job {record.id} has not ended (its platform answers {status.state})"


def _upstream_dirs(target: Target, decided: dict[str, Decision]) -> dict[str, str]:
    """The results directories of the up-to-date targets ``target`` needs."""
    return {need: str(decided[need].results_dir) for need in target.needs if not decided[need].run}


def _digest(decision: Decision) -> str:
    """A needed target's identity: its fingerprint and the job whose results are used."""
    assert decision.fingerprint is not None
    return f"{decision.fingerprint.digest}@{decision.job_id}"


def _why(target: Target, fingerprint: Fingerprint, index: Index) -> str:
    if index.results_missing(fingerprint):
        return "results missing"
    last = index.last_launch(target_key(target))
    stored = last.get("fingerprint")
    if not isinstance(stored, dict):
        return "never run"
    if stored == fingerprint.to_json() or Fingerprint(**stored).digest == fingerprint.digest:
        job_id = last.get("job_id")
        state = _state_of(index.ledger, job_id)
        return f"last run {job_id} ended {state}" if state else "never completed"
    return fingerprint.differences(stored)[0]


def _state_of(ledger: Ledger, job_id: object) -> str | None:
    if not isinstance(job_id, str):
        return None
    try:
        return ledger.get(job_id).state
    except TaospecError:
        return None


# -- building ----------------------------------------------------------------


def gpu_claim(target: Target) -> tuple[str, frozenset[str]] | None:
    """The host and GPU ids a target holds while it runs (None: no GPUs, or a scheduler's)."""
    job = target.job
    if not job.gpus or job.platform not in ("docker", "local", "brev"):
        return None
    hosts = {"docker": job.docker.host or "local-engine", "local": "localhost"}
    host = hosts.get(job.platform) or f"brev:{job.brev.instance if job.brev else ''}"
    ids = frozenset({"*"}) if job.gpus == "all" else frozenset(str(g) for g in job.gpus)
    return host, ids


def queued_by_scheduler(target: Target) -> bool:
    """Slurm targets are all submitted at once; the cluster's scheduler queues them."""
    return target.job.platform == "slurm"


def _clash(a: tuple[str, frozenset[str]] | None, b: tuple[str, frozenset[str]] | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    return "*" in a[1] or "*" in b[1] or bool(a[1] & b[1])


@dataclass(slots=True)
class Outcome:
    """How one target's run ended (its start and end times are set when it is done).

    ``refused`` marks a target stopped before any record was opened, for a
    reason in the input or on the host (a GPU another job holds): nothing ran.
    ``internal`` marks one that taospec itself failed (:data:`INTERNAL_ERROR`).
    ``running`` names the job of the same fingerprint that another run had under way
    when this one was to launch it (:class:`Busy`): it was refused too.
    ``lost`` marks a job the run stopped following before it ended, its backend answering
    UNKNOWN (an engine that stopped answering): it may still be running, and ``message``
    says why and how to follow it again.
    """

    name: str
    state: str
    record: Record | None = None
    message: str = ""
    _: KW_ONLY
    fingerprint: Fingerprint | None = None
    refused: bool = False
    internal: bool = False
    lost: bool = False
    running: str | None = None
    started: float = 0.0
    ended: float = 0.0


@dataclass(eq=False)
class Build:
    """Runs the out-of-date targets of one decision list.

    ``submit_backoff`` is the wait in seconds before the first retry of a submit that
    failed (see :func:`taospec.retrying.backoff`); ``notifier`` (``$TAOSPEC_NOTIFY``, read
    once by the caller, as :func:`decide` was given it) goes in the plan of a target
    rendered at its launch. What runs when a job ends is the notifier its stored plan shows.
    """

    jobfile: JobFile
    decisions: list[Decision]
    ledger: Ledger
    _: KW_ONLY
    jobs: int = 1
    keep_going: bool = False
    follow_logs: bool = False
    allow_shared_gpus: bool = False
    user: str | None = None
    board: Board | None = None
    submit_backoff: float = BACKOFF_FIRST
    notifier: tuple[str, ...] = ()
    results: dict[str, Outcome] = field(default_factory=dict, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _running: dict[str, Record | None] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _notified: set[str] = field(default_factory=set, init=False)

    def run(self) -> dict[str, Outcome]:
        """Build everything; on Ctrl-C cancel what runs, record it, and re-raise."""
        done: queue.Queue[Outcome] = queue.Queue()
        waiting = [d for d in self.decisions if d.run]
        upstream = {d.target.name: d for d in self.decisions if not d.run}
        board = self.board or Board(enabled=False)
        try:
            while waiting or self._running:
                self._start_ready(waiting, upstream, done, board)
                if not self._running:
                    break
                try:
                    outcome = done.get(timeout=0.5)
                except queue.Empty:
                    board.refresh()
                    continue
                self._finished(outcome, waiting, board)
        except KeyboardInterrupt:
            self._cancel_all(board)
            while not done.empty():  # what the workers ended with, each job said as it ended
                outcome = done.get_nowait()
                self.results.setdefault(outcome.name, outcome)
                if outcome.record is not None and outcome.record.terminal_state is not None:
                    self._notify(outcome.record, outcome.name, board)
            raise
        for decision in waiting:
            self.results[decision.target.name] = Outcome(
                decision.target.name, "NOT RUN", message="an upstream target failed"
            )
        board.refresh()
        return self.results

    def _start_ready(
        self,
        waiting: list[Decision],
        upstream: dict[str, Decision],
        done: queue.Queue[Outcome],
        board: Board,
    ) -> None:
        if self._failed() and not self.keep_going:
            for decision in waiting:  # as make stops: said, so that no target goes unexplained
                name = decision.target.name
                failed = any(self._failed_target(need) for need in decision.target.needs)
                why = "an upstream target failed" if failed else STOPPED_AFTER_FAILURE
                self.results[name] = Outcome(name, "NOT RUN", message=why)
            waiting.clear()
            return
        for decision in list(waiting):
            queued = queued_by_scheduler(decision.target)
            if not queued and self._slots_used() >= self.jobs:
                continue
            name = decision.target.name
            needs = decision.target.needs
            if any(self._blocked(n) for n in needs):
                waiting.remove(decision)
                self.results[name] = Outcome(name, "NOT RUN", message="an upstream target failed")
                continue
            if not all(n in upstream or self._complete(n) for n in needs):
                continue
            claim = gpu_claim(decision.target)
            if any(_clash(claim, gpu_claim(self.jobfile.targets[r])) for r in self._running):
                continue
            waiting.remove(decision)
            self._running[name] = None
            board.start(name)
            thread = threading.Thread(
                target=self._work, args=(decision, upstream, done, board), daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _slots_used(self) -> int:
        """Running targets that count against -j (a scheduler queues its own)."""
        return sum(1 for n in self._running if not queued_by_scheduler(self.jobfile.targets[n]))

    def _failed(self) -> bool:
        return any(o.state not in (COMPLETE,) for o in self.results.values())

    def _failed_target(self, name: str) -> bool:
        outcome = self.results.get(name)
        return outcome is not None and outcome.state not in (COMPLETE, "NOT RUN")

    def _blocked(self, name: str) -> bool:
        outcome = self.results.get(name)
        return outcome is not None and outcome.state != COMPLETE

    def _complete(self, name: str) -> bool:
        outcome = self.results.get(name)
        return outcome is not None and outcome.state == COMPLETE

    def _finished(self, outcome: Outcome, waiting: list[Decision], board: Board) -> None:
        self._running.pop(outcome.name, None)
        self.results[outcome.name] = outcome
        # With one target, the run's closing line says it all; with several, each says so now.
        board.finish(outcome, announce=sum(d.run for d in self.decisions) > 1)

    def _upstream(
        self, target: Target, upstream: dict[str, Decision]
    ) -> tuple[dict[str, str], dict[str, str]]:
        dirs, digests = {}, {}
        for need in target.needs:
            if need in upstream:
                dirs[need] = str(upstream[need].results_dir)
                digests[need] = _digest(upstream[need])
            else:
                outcome = self.results[need]
                assert outcome.record is not None
                assert outcome.fingerprint is not None
                dirs[need] = outcome.record.results_dir
                digests[need] = f"{outcome.fingerprint.digest}@{outcome.record.id}"
        return dirs, digests

    def _work(
        self,
        decision: Decision,
        upstream: dict[str, Decision],
        done: queue.Queue[Outcome],
        board: Board,
    ) -> None:
        name = decision.target.name
        started = time.time()
        try:
            outcome = self._build_one(decision, upstream, board)
        except Busy as busy:
            outcome = Outcome(
                name, "NOT RUN", message=busy.reason, refused=True, running=busy.job_id
            )
        except SubmitFailed as failed:  # its record is opened and says ERROR: report that job
            outcome = Outcome(name, ERROR, failed.record, message=str(failed))
        except SubmitInterrupted as stopped:  # the run was cancelled: report the job's end
            outcome = Outcome(name, stopped.record.state, stopped.record)
        except TaospecError as exc:
            if exc.exit_code == EXIT_INTERNAL:  # as the command line's handler reports it
                outcome = Outcome(name, INTERNAL_ERROR, message=str(exc), internal=True)
            else:
                refused = isinstance(exc, InvalidInput)
                outcome = Outcome(name, FAILED, message=str(exc), refused=refused)
        except Exception:  # a bug in one worker must not hang the build
            bug = f"a bug; please report it with this output:\n{traceback.format_exc().rstrip()}"
            outcome = Outcome(name, INTERNAL_ERROR, message=bug, internal=True)
        outcome.started, outcome.ended = started, time.time()
        done.put(outcome)

    def _build_one(
        self, decision: Decision, upstream: dict[str, Decision], board: Board
    ) -> Outcome:
        target = decision.target
        try:
            record, fingerprint = self.launch(decision, upstream)
            board.update(target.name, RUNNING, record.id)
            retries = len(earlier(self.ledger, record))  # submits that failed and were retried
            while True:
                if self.follow_logs:
                    self._stream_logs(record, target.name, board)
                record, state, message = self._follow(record, target.name, board)
                if not self._retrying(target, record, retries, board):
                    break
                retries += 1
                try:
                    record = self._resubmit(target, record, board, fingerprint)
                except Busy as busy:
                    board.say(f"{target.name}: {record.id} not retried: {busy.reason}")
                    break
                board.update(target.name, RUNNING, record.id)
        except SubmitFailed as failed:  # the chain ends in a job recorded ERROR at its submit
            self._notify(failed.record, target.name, board)
            raise
        if record.terminal_state is not None:
            self._notify(record, target.name, board)
        if state == COMPLETE:
            Index(self.ledger).completed(record.id, fingerprint)
        lost = state == UNKNOWN and record.terminal_state is None
        return Outcome(target.name, state, record, message, fingerprint=fingerprint, lost=lost)

    def _retrying(
        self,
        target: Target,
        record: Record,
        retries: int,
        board: Board,
        *,
        failed: str = "ended ERROR ERR_INFRA",
        wait: float = 0.0,
    ) -> bool:
        """Whether to retry a job that ended (or whose submit ``failed``): an ERR_INFRA
        failure, with ``retry: {max}`` retries left and room in its chain; says so either
        way, with the ``wait`` before the retry."""
        wanted = target.job.retry_max
        if self._stop.is_set() or not wanted or not retryable(record):
            return False
        if retries >= wanted:
            board.say(f"{target.name}: {record.id} {failed}; no retries left (max {wanted})")
            return False
        if full(self.ledger, record):
            board.say(
                f"{target.name}: {record.id} {failed}; its chain already holds {MAX_CHAIN} retries"
            )
            return False
        after = f" in {wait:g}s" if wait else ""
        board.say(f"{target.name}: {record.id} {failed}; retry {retries + 1} of {wanted}{after}")
        return True

    def _on_running(self, target: Target) -> Callable[[Record], None]:
        def running(record: Record) -> None:
            with self._lock:
                self._running[target.name] = record

        return running

    def launch(
        self, decision: Decision, upstream: dict[str, Decision]
    ) -> tuple[Record, Fingerprint]:
        """Render with the real upstream results, submit, and index the launch. Unless
        forced, :class:`Busy` when a job of the same fingerprint is under way, as decided
        under the target's lock, which its record's open ends (its job noted first)."""
        target = decision.target
        board = self.board or Board(enabled=False)
        upstream = upstream or {d.target.name: d for d in self.decisions if not d.run}
        dirs, digests = self._upstream(target, upstream)
        plan = decision.plan
        if plan is None:  # it waited for an upstream: rendered now, with its real results
            plan = render(target.job, user=self.user, upstream=dirs, notifier=self.notifier)
        sidecar: dict[str, object] = {
            "spec": target.job.file,
            "target": target_key(target),
            "taospec": __version__,
        }
        work = decision.work or compute(target, plan, digests)
        known = decision.fingerprint is not None or not has_image_digest(plan)
        fingerprint = work.with_image(decision.fingerprint.image if decision.fingerprint else None)
        index = Index(self.ledger)

        def noted(record: Record) -> None:
            index.opened(target_key(target), record.id, fingerprint, image_known=known)

        with deciding(index, work.work_digest, noted) as opened:
            if not decision.forced:
                refuse_busy(
                    target.name, index, work.work_digest, fingerprint.digest if known else None
                )
            sidecar["work"] = work.work_digest
            if known:
                sidecar["fingerprint"] = fingerprint.digest
            # Else the engine is asked for the image's id while the plan's steps run; an
            # image it lacks is pulled by the plan, so its id is known only afterwards.
            lookup = None if known else look_up_image(plan)
            try:
                record = self._locked_submit(target, plan, sidecar, board, work=work, opened=opened)
            finally:
                image = lookup.result() if lookup else None
        if known:
            return record, fingerprint
        pulled = work.with_image(image or image_digest(plan, {}))
        self.ledger.update_sidecar(record.id, fingerprint=pulled.digest)
        index.launched(target_key(target), record.id, pulled)
        return record, pulled

    def _locked_submit(
        self,
        target: Target,
        plan: Plan,
        sidecar: dict[str, object],
        board: Board,
        *,
        work: Fingerprint,
        opened: Callable[[Record], None],
    ) -> Record:
        """The GPU pick and check and the submit, in one critical section per machine; a
        submit that fails ERR_INFRA is retried (:meth:`_submit_again`) after the lock."""
        shared = self.allow_shared_gpus
        claim = claimed_gpus(plan, self.ledger, allow_shared=shared, progress=board.note)
        try:
            with claim as (claimed, notes, claimed_by_record):
                if notes:
                    board.note(f"{target.name}: GPUs {notes['gpus_chosen']} chosen")

                def open_(record: Record) -> None:
                    claimed_by_record()
                    opened(record)

                return self._submit(target, claimed, {**sidecar, **notes}, board, open_)
        except SubmitFailed as failed:
            return self._submit_again(target, failed, board, work)

    def _submit_again(
        self, target: Target, failed: SubmitFailed, board: Board, work: Fingerprint
    ) -> Record:
        """Retry a submit that failed ERR_INFRA as ``retry: {max}`` allows, each time after
        :func:`taospec.retrying.backoff`; the last failure is raised when none is left, or
        when another run started a job of the same fingerprint meanwhile. While this waits,
        the failed record's :data:`RETRY_DUE` note keeps other runs from starting one."""
        while True:
            record = failed.record
            retries = len(earlier(self.ledger, record))
            wait = backoff(retries + 1, self.submit_backoff)
            failed_how = "ended ERROR ERR_INFRA while submitting"
            if not self._retrying(target, record, retries, board, failed=failed_how, wait=wait):
                raise failed
            try:
                with retry_due(target.name, self.ledger, record, work.work_digest):
                    if self._stop.wait(wait):
                        raise failed
                    return self._resubmit(target, record, board, work)
            except SubmitFailed as again:
                failed = again
            except Busy as busy:
                board.say(f"{target.name}: {record.id} not retried: {busy.reason}")
                raise failed from None

    def _resubmit(self, target: Target, record: Record, board: Board, work: Fingerprint) -> Record:
        """Submit ``record`` again, unless another run started a job of the same fingerprint
        (:class:`Busy`), decided under the work's lock as a first launch is."""
        index = Index(self.ledger)
        digest, chain = _noted_digest(self.ledger, record), chain_ids(self.ledger, record)

        def noted(new: Record) -> None:  # with its fingerprint known, resubmit notes it
            if digest is None:
                index.opened(target_key(target), new.id, work, image_known=False)

        with deciding(index, work.work_digest, noted) as opened:
            refuse_busy(target.name, index, work.work_digest, digest, chain)
            return resubmit(
                self.ledger,
                record,
                allow_shared_gpus=self.allow_shared_gpus,
                progress=board.note,
                on_running=self._on_running(target),
                stopping=self._stop.is_set,
                opened=opened,
            ).record

    def _submit(
        self,
        target: Target,
        plan: Plan,
        sidecar: dict[str, object],
        board: Board,
        opened: Callable[[Record], None],
    ) -> Record:
        return submit(
            plan,
            self.ledger,
            sidecar=sidecar,
            progress=board.note,
            on_running=self._on_running(target),
            stopping=self._stop.is_set,
            opened=opened,
        ).record

    def _stream_logs(self, record: Record, name: str, board: Board) -> None:
        module = platforms.get(record.platform)
        prefix = f"[{name}] " if len(self.decisions) > 1 else ""
        output = board.job_output(name, prefix)
        module.logs(
            record,
            self.ledger.sidecar(record.id),
            tail=None,
            follow=True,
            on_line=output.line,
            on_said=lambda line: board.note(f"{prefix}{line.strip()}"),
            on_part=output.part,
        )

    def _follow(self, record: Record, name: str, board: Board) -> tuple[Record, str, str]:
        """Poll until the job ends; (record, state, message). A backend that keeps
        answering UNKNOWN (the job vanished, or the engine is gone) ends the wait, the job
        not recorded as ended, with a message that says so.
        Without a live board, a progress line is printed every ``board.interval``."""
        delay = POLL_FIRST
        unknown = 0
        due = ticker.Ticker(board.interval)
        while not self._stop.is_set():
            record, status = poll(record, self.ledger)
            waits = status.message if status.state == PENDING else ""  # what it waits for
            board.update(name, status.state, record.id, waits)
            if record.terminal_state is not None:
                return record, record.state, record.transitions[-1].message
            unknown = unknown + 1 if status.state == UNKNOWN else 0
            if unknown >= UNKNOWN_POLLS:
                return record, UNKNOWN, stopped_following(record.id, status)
            if board.plain and due.due():
                board.progress(self._progress_line(record, name, status))
            self._stop.wait(max(0.05, min(delay, due.wait())))
            delay = min(delay * 2, POLL_MAX)
        record = self.ledger.get(record.id)
        return record, record.state, record.transitions[-1].message

    def _progress_line(self, record: Record, name: str, status: Status) -> str:
        """State, elapsed time, and epoch/KPIs from ``status.json`` when the results
        directory is readable here, else the job's last output line (redacted), or, while
        it waits to start, what its platform says of the wait."""
        found = progress.find(record.results_dir, record.action)
        latest = progress.read(found) if found is not None else None
        last = ""
        if latest is None and status.state == PENDING:  # no output yet: why it waits
            last = status.message
        elif latest is None:
            module = platforms.get(record.platform)
            try:
                sidecar = self.ledger.sidecar(record.id)
                last = redacted(module.log_tail(record, sidecar, 5, writing=True))
            except TaospecError:
                last = ""
        return ticker.line(
            f"{name} {record.id}", status.state, age(record), latest, last_output=last
        )

    def _notify(self, record: Record, name: str, board: Board) -> None:
        """Run the notifier the job's stored plan shows (its ``notify:``, else
        ``$TAOSPEC_NOTIFY``) once, for a job this run saw end; a failing notifier is reported
        and changes nothing."""
        with self._lock:
            if not board.enabled or record.id in self._notified:
                return
            self._notified.add(record.id)
        argv = notify.planned(self.ledger.sidecar(record.id))
        variables = notify.outcome(
            record.id, record.state, record.err_class, age(record), record.results_dir
        )
        problem = notify.notify(argv, variables)
        if problem:
            board.say(f"{name}: {problem}")

    def _cancel_all(self, board: Board) -> None:
        """Stop following, cancel every launched job, wait for the workers, cancel late ones."""
        interrupts.hold()
        self._stop.set()
        self._cancel_running(board)
        for thread in self._threads:
            thread.join(timeout=120)
        self._cancel_running(board)

    def cancel_launched(self) -> None:
        """Interrupted outside :meth:`run` (a detached submit): cancel what was launched."""
        interrupts.hold()
        self._cancel_running(self.board or Board(enabled=False))

    def _cancel_running(self, board: Board) -> None:
        with self._lock:
            running = [(n, r) for n, r in self._running.items() if r is not None]
        for name, record in running:
            before = self.ledger.get(record.id).terminal_state
            done = cancel_job(record, self.ledger, reason="interrupted", progress=board.note)
            self.results[name] = Outcome(name, done.record.state, done.record)
            if before is None and done.record.terminal_state is not None:
                self._notify(done.record, name, board)


# -- what the person at the terminal sees -------------------------------------


def _nowhere(_text: str) -> None:
    """A board's default destination."""


def _columns() -> int:
    """How wide the terminal the live lines are drawn on (stderr) is: stdout, which
    ``shutil`` asks, may be a file (``run -f > train.log``). A terminal that says 0 (a
    pseudo-terminal no one sized) is taken as ``shutil`` takes it."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size().columns


_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~]?)")
"""A terminal's escape sequence: CSI (colours, cursor moves), OSC (a window title), others."""
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _plain(text: str) -> str:
    """``text`` as the characters it shows: its escape sequences and other control
    characters left out, a tab made a blank (a bar under a live line must be one line that
    moves nothing, or the live lines are erased a line short)."""
    return _CONTROL.sub("", _ESCAPE.sub("", text.replace("\t", " ")))


def _cells(text: str, width: int) -> str:
    """The start of ``text`` that fills at most ``width`` cells of a terminal: a wide
    character takes two, a combining one none."""
    used = 0
    for index, char in enumerate(text):
        wide = unicodedata.east_asian_width(char) in "WF"
        used += 0 if unicodedata.combining(char) else 2 if wide else 1
        if used > width:
            return text[:index]
    return text


@dataclass(eq=False, kw_only=True)
class Board:
    """Live lines for running targets on a terminal; plain lines otherwise.

    Progress goes to ``write`` (stderr), the jobs' own output to ``out`` (stdout).
    """

    enabled: bool
    live: bool = False
    write: Callable[[str], None] = _nowhere
    out: Callable[[str], None] = _nowhere
    interval: float = ticker.DEFAULT_INTERVAL
    _rows: dict[str, tuple[str, str, float]] = field(default_factory=dict, init=False)
    _bars: dict[str, str] = field(default_factory=dict, init=False)
    _waits: dict[str, str] = field(default_factory=dict, init=False)
    _drawn: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def _emit(self, text: str, *, job_output: bool = False) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._erase()
            line = text if text.endswith("\n") else text + "\n"
            (self.out if job_output else self.write)(line)
            self._draw()

    def _erase(self) -> None:
        if self.live and self._drawn:
            self.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def _draw(self) -> None:
        if not self.live:
            return
        now = time.time()
        lines = []
        for name, (state, job_id, since) in self._rows.items():
            lines.append(f"  {state:<9} {name}  {_elapsed(now - since)}  {job_id}")
            if below := self._bars.get(name) or self._waits.get(name):
                lines.append(f"    {_cells(below, _columns() - 5)}")  # one line: erased as one
        if lines:
            self.write("\n".join(lines) + "\n")
        self._drawn = len(lines)

    def refresh(self) -> None:
        """Redraw the live lines (elapsed times move)."""
        if self.enabled and self.live:
            with self._lock:
                self._erase()
                self._draw()

    def start(self, name: str) -> None:
        """A target begins."""
        self._rows[name] = ("STARTING", "", time.time())
        self._emit(f"{name}: starting")

    def update(self, name: str, state: str, job_id: str, waits: str = "") -> None:
        """A running target's state, and what its platform says it waits for (shown under
        its live line while it does)."""
        previous = self._rows.get(name)
        if previous is None:
            return
        self._rows[name] = (state, job_id, previous[2])
        if waits:
            self._waits[name] = _plain(waits)
        else:
            self._waits.pop(name, None)
        quiet = state in (RUNNING, COMPLETE, ERROR, CANCELED)  # said by submit, or by finish
        if previous[0] != state and not self.live and not quiet:
            self._emit(f"{name}: {state} ({job_id})")

    def finish(self, outcome: Outcome, *, announce: bool = True) -> None:
        """A target ended: its live line goes, and (``announce``) a line says how it ended."""
        with self._lock:  # while another job's thread may draw them
            self._rows.pop(outcome.name, None)
            self._bars.pop(outcome.name, None)
            self._waits.pop(outcome.name, None)
        if not announce:
            return
        took = _elapsed(outcome.ended - outcome.started)
        detail = f" ({outcome.message})" if outcome.state != COMPLETE and outcome.message else ""
        self._emit(f"{outcome.name}: {outcome.state} in {took}{detail}")

    def note(self, text: str) -> None:
        """A progress line from a worker (shown without a live display only)."""
        if not self.live:
            self._emit(text)

    def output(self, line: str) -> None:
        """A line of a job's own output."""
        self._emit(line, job_output=True)

    def job_output(self, name: str, prefix: str) -> JobOutput:
        """What takes target ``name``'s output (each line after ``prefix``), with the parts
        of a line redrawn in place (a progress bar, see
        :class:`~taospec.platforms.common.Redrawn`): of one job without live lines, written as
        they come, as ``logs -f`` writes them; else each target's last redraw is shown under
        its live line, and the line goes out whole once it ends (the parts of two jobs'
        lines, or of one under live lines, would break each other)."""
        return JobOutput(self, name, prefix)

    def redrawn(self, name: str, part: str) -> None:
        """Show the last redraw in ``part`` (redacted with the whole part) under ``name``'s
        live line, as plain text (:func:`_plain`) cut to the terminal's width."""
        if not (self.enabled and self.live):
            return
        with self._lock:
            self._erase()
            last = redacted(part).rstrip("\r").rsplit("\r", 1)[-1]
            self._bars[name] = redacted(_plain(last))  # what the escapes parted, read whole
            self._draw()

    def ended_line(self, name: str) -> None:
        """``name``'s line redrawn in place has ended: its last redraw goes."""
        with self._lock:
            self._bars.pop(name, None)

    def part(self, text: str) -> None:
        """A part of one job's line not ended yet, written as it is (no live lines)."""
        if self.enabled:
            with self._lock:
                self.out(text)

    @property
    def plain(self) -> bool:
        """True when shown, but not as live lines: progress comes as printed lines."""
        return self.enabled and not self.live

    def progress(self, line: str) -> None:
        """A running job's progress line (printed only without a live display)."""
        if self.plain:
            self._emit(line)

    def say(self, text: str) -> None:
        """A line everyone should see, live display or not."""
        self._emit(text)


class JobOutput:
    """A target's output for a :class:`Board` (see :meth:`Board.job_output`)."""

    def __init__(self, board: Board, name: str, prefix: str) -> None:
        self.board, self.name, self.prefix = board, name, prefix
        self.as_it_comes = not board.live and not prefix
        self.parts: list[str] = []  # of the line not ended yet, when it goes out whole

    def part(self, text: str) -> None:
        """A part of a line not ended yet, through a ``\\r``."""
        if self.as_it_comes:
            self.board.part(text)
            return
        self.parts.append(text)
        self.board.redrawn(self.name, text)

    def line(self, text: str) -> None:
        """A line, or what of it the parts handed on did not hold."""
        if self.parts:
            text = "".join(self.parts) + text
            self.parts.clear()
            self.board.ended_line(self.name)
        self.board.output(self.prefix + text)


def age(record: Record) -> float:
    """Seconds from the job's submission to its last transition when it ended, else to now."""
    start = _instant(record.submitted_at)
    if start is None:
        return 0.0
    end = _instant(record.transitions[-1].ts) if record.terminal_state else None
    return max(0.0, (end if end is not None else time.time()) - start)


def _instant(text: str) -> float | None:
    """A transition's time in seconds, or None where another writer wrote no time there."""
    try:
        return instant(text).timestamp()
    except ValueError:
        return None


STOPPED_AFTER_FAILURE = "not started, as a target failed; run -k builds what does not need it"
"""Why a target did not run when another failed and the run did not keep going."""


def _elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def summary(decisions: list[Decision], results: dict[str, Outcome]) -> list[str]:
    """A table: each target, what happened, its job and how long it took."""
    rows = [("TARGET", "RESULT", "JOB", "TIME")]
    for decision in decisions:
        name = decision.target.name
        if not decision.run:
            rows.append((name, "up to date", decision.job_id or "", ""))
            continue
        outcome = results.get(name)
        if outcome is None:
            rows.append((name, "NOT RUN", "", ""))
            continue
        job = outcome.record.id if outcome.record else ""
        took = _elapsed(outcome.ended - outcome.started) if outcome.ended else ""
        rows.append((name, outcome.state, job, took))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
