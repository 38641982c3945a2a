"""``taospec run``: build the named targets (default: all) and what they need.

What is up to date is skipped; what runs is submitted and followed until it
ends. A target whose job of the same plan is still under way (another run
started it) starts nothing: the run is refused (exit 2) and says how to follow
or cancel that job, or force another with ``-B``. ``--dry-run`` says for each
target whether it runs and why (``busy`` for one under way), then shows the plans
of those that would; ``--check`` only answers whether anything would run or is
still running (exit 1) or all is up to date (exit 0).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence

from taospec import doctor, notify, plandiff, plantext, platforms, preflight, retrying, ticker
from taospec.commands.session import open_ledger, say
from taospec.diagnostics import Problem, raise_if_any, shown_file, unique
from taospec.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_OK,
    InvalidInput,
)
from taospec.executor import check_environment, secret_values
from taospec.job import Job, JobFile
from taospec.ledger import Ledger
from taospec.lint import redacted
from taospec.loader import load_located
from taospec.pipeline import (
    Board,
    Build,
    Busy,
    Decision,
    Outcome,
    age,
    busy_line,
    decide,
    summary,
)
from taospec.platforms.common import redacted_output
from taospec.states import CANCELED, COMPLETE
from taospec.yamlsrc import Source

TAIL_LINES = 20


def run(
    file: str,
    targets: Sequence[str] = (),
    *,
    dry_run: bool = False,
    check: bool = False,
    detach: bool = False,
    force: bool = False,
    keep_going: bool = False,
    jobs: int = 1,
    follow: bool = False,
    user: str | None = None,
    allow_shared_gpus: bool = False,
    as_json: bool = False,
) -> int:
    """Decide, then (unless only asked) build. Exit 0 only when every run target completed."""
    if as_json and not dry_run:
        raise InvalidInput("run --json goes with -n (--dry-run): a build reports as it goes")
    jobfile, sources = load_located(file)
    names = jobfile.closure(tuple(targets))
    review = dry_run or check  # runs nothing: needs neither the engines nor passed values
    passed = sorted({n for t in names for n in jobfile.targets[t].job.env_pass})
    # Opened (not yet written) first, so that even a refusal below prints no passed value.
    ledger = open_ledger(secret_values(tuple(passed)))
    # In each plan without notify:, for review too, and refused before any record opens.
    notifier = notify.notifier(os.environ, passed)
    # The engines of the docker jobs are asked now, answer while the plans render, and are
    # read by the preflight; what nobody read is ended when the block is left.
    with doctor.Engines([] if review else [jobfile.targets[n].job for n in names]) as engines:
        raise_if_any(_refusals(jobfile, names, sources, review=review, dry_run=dry_run, user=user))
        forced = (jobfile.select(tuple(targets)) if targets else names) if force else []
        decisions = decide(
            jobfile,
            names,
            ledger,
            force=forced,
            user=user,
            preview=dry_run,
            launching=not review,
            sources=sources,
            notifier=notifier,
        )
        if dry_run and as_json:
            print(json.dumps(decisions_json(decisions, ledger), indent=2))
            return EXIT_OK
        if review:
            _print_decisions(decisions, with_plans=dry_run, ledger=ledger)
            return EXIT_JOB_FAILED if check and any(d.run for d in decisions) else EXIT_OK
        if _under_way(decisions, file, targets, pipeline=jobfile.pipeline):
            return EXIT_INVALID
        for decision in decisions:
            if decision.run:
                check_environment(decision.target.job, os.environ)
        interval = ticker.interval(os.environ)
        backoff = retrying.backoff_first(os.environ)
        stopped = _preflight([d.target.job for d in decisions if d.run], engines)
    if stopped:
        return stopped
    builder = functools.partial(
        Build, jobfile, decisions, ledger, allow_shared_gpus=allow_shared_gpus, user=user,
        submit_backoff=backoff, notifier=notifier,
    )  # fmt: skip
    if detach:
        return _detach(builder(board=Board(enabled=False)), file, targets)
    for decision in decisions:
        if not decision.run:
            say(f"{decision.target.name}: {decision.reason}")
    if not any(decision.run for decision in decisions):
        return EXIT_OK
    board = Board(
        enabled=True, live=live_board(), write=_to_stderr, out=_to_stdout, interval=interval
    )
    build = builder(jobs=jobs, keep_going=keep_going, follow_logs=follow, board=board)
    try:
        results = build.run()
    except KeyboardInterrupt:
        _report(decisions, build.results, ledger, show_summary=jobfile.pipeline)
        return EXIT_INTERRUPTED
    code = _report(decisions, results, ledger, show_summary=jobfile.pipeline)
    _busy_meanwhile(results, file, targets, pipeline=jobfile.pipeline)
    return code


def _refusals(
    jobfile: JobFile,
    names: Sequence[str],
    sources: Mapping[str, Source],
    *,
    review: bool,
    dry_run: bool,
    user: str | None = None,
) -> list[Problem]:
    """What stops a run before any record opens: a mount source that is not here (dockerd
    would create it empty), a results_root that is a file (it holds no results folder), an
    input that cannot be fingerprinted, and a passed value unset or written in the job. A
    dry run only warns of the first two, which are about this machine, so that the review
    of a job meant for another machine still shows its plans."""
    found: list[Problem] = []
    warned: list[Problem] = []
    roots: preflight.RootVerdicts = {}
    for name in names:
        job, source = jobfile.targets[name].job, sources[name]
        here = preflight.on_this_machine(job, source, user, roots)
        (warned if dry_run else found).extend(here)
        if not review:
            found += preflight.passed_variables(job, source, os.environ)
        found += preflight.inputs(jobfile.targets[name], source)
        found += preflight.passed_values_written(job, source, os.environ)
    if not review:
        found += preflight.slurm_partitions((jobfile.targets[n].job, sources[n]) for n in names)
    for problem in unique(warned):
        say(f"warning: {problem} (run stops here)")
    return found


def _under_way(
    decisions: list[Decision], file: str, targets: Sequence[str], *, pipeline: bool
) -> bool:
    """Say so, and start nothing, when a target's job of the same plan has not ended: the
    run that started it follows it (and goes on to what needs it), so another would run
    the same work twice. ``-B`` on the targets that would run starts another anyway."""
    busy = [(d.target.name, d.reason, d.running) for d in decisions if d.running]
    if busy:
        named = [*targets, *(d.target.name for d in decisions if d.run)] if pipeline else targets
        _say_busy(busy, file, named)
    return bool(busy)


def _busy_meanwhile(
    results: Mapping[str, Outcome], file: str, targets: Sequence[str], *, pipeline: bool
) -> None:
    """The targets refused at their launch: another run had started a job of the same plan
    after this one decided (:class:`~taospec.pipeline.Busy`)."""
    busy = [(o.name, o.message, o.running) for o in results.values() if o.running]
    if busy:
        ran = any(o.record is not None for o in results.values())
        named = [*targets, *(name for name, _, _ in busy)] if pipeline else targets
        _say_busy(busy, file, named, ran=ran)


def _say_busy(
    busy: Sequence[tuple[str, str, str | None]],
    file: str,
    named: Sequence[str],
    *,
    ran: bool = False,
) -> None:
    """Each target not started for a job under way, and how to start another (``-B`` on
    ``named``); ``ran`` when other targets of the run did run."""
    for name, reason, job_id in busy:
        say(f"{name}: {busy_line(reason, str(job_id))}")
    again = shlex.join(["taospec", "run", "-B", file, *dict.fromkeys(named)])
    what = f"{', '.join(name for name, _, _ in busy)} not run" if ran else "nothing was run"
    say(f"{what}: run again once it has ended, or `{again}` to start another")


def live_board(environ: Mapping[str, str] = os.environ) -> bool:
    """Redrawn lines only on a terminal that can move its cursor (not ``TERM=dumb``); the
    board draws no colour, so ``NO_COLOR`` holds either way."""
    return sys.stderr.isatty() and environ.get("TERM", "") != "dumb"


def _preflight(jobs: list[Job], engines: doctor.Engines) -> int:
    """The cheap checks for each docker job's host, before any record is opened: exit 2 with
    the advice of a failed check; too little free space is only a warning."""
    for job in doctor.docker_jobs(jobs):
        refusals = []
        for check in doctor.failed(doctor.job_checks(job, full=False, engines=engines)):
            if doctor.is_space_check(check):
                say(f"warning: {job.name}: {check.name}: {check.detail}; {check.advice}")
            else:
                refusals.append(check)
        for check in refusals:
            say(f"{shown_file(job.file)}: {job.name}: preflight: {check.name}: {check.detail}")
            if check.advice:
                say(f"  {check.advice}")
        if refusals:
            say("nothing was run (taospec doctor FILE shows every check)")
            return EXIT_INVALID
    return EXIT_OK


def _to_stdout(text: str) -> None:
    sys.stdout.write(redacted_output(text))  # the jobs' output: a long line a part at a time
    sys.stdout.flush()


def _to_stderr(text: str) -> None:
    sys.stderr.write(redacted(text))
    sys.stderr.flush()


def _print_decisions(decisions: list[Decision], *, with_plans: bool, ledger: Ledger) -> None:
    width = max(len(d.target.name) for d in decisions)
    for decision in decisions:
        verb = "skip" if not decision.run else "busy" if decision.running else "run "
        print(f"{verb}  {decision.target.name:<{width}}  {decision.reason}")
    if not with_plans:
        return
    for decision in decisions:
        if decision.run and not decision.running and decision.plan is not None:
            print()
            print(plantext.text(decision.plan), end="")
            changes = plandiff.since_last(decision.target, decision.plan, ledger)
            if changes:
                print(f"\n# what changed since the last run of {decision.target.name}:")
                print(changes, end="")


def decisions_json(decisions: list[Decision], ledger: Ledger) -> dict[str, object]:
    """``run -n --json``: each target's decision, its plan, and how it changed since last run."""
    return {
        "decisions": [
            {
                "target": d.target.name,
                "run": d.run,
                "reason": d.reason,
                "job_id": d.job_id,
                "running": d.running,
                "plan": None if d.plan is None else d.plan.to_json(),
                "changes": (
                    plandiff.since_last(d.target, d.plan, ledger)
                    if d.run and d.plan is not None
                    else ""
                ),
            }
            for d in decisions
        ]
    }


def _detach(build: Build, file: str, targets: Sequence[str]) -> int:
    """Submit what is out of date without following it; refused when targets wait on others,
    and (exit 2) at a target whose job of the same plan another run has under way."""
    running = {d.target.name for d in build.decisions if d.run}
    for decision in build.decisions:
        waits = [n for n in decision.target.needs if n in running]
        if decision.run and waits:
            say(
                f"cannot detach: {decision.target.name} waits for {waits[0]}, which runs first; "
                "run without --detach"
            )
            return EXIT_INVALID
    ran = False
    try:
        for decision in build.decisions:
            if decision.run:
                record, _ = build.launch(decision, {})
                print(record.id, flush=True)
                ran = True
            else:
                say(f"{decision.target.name}: {decision.reason}")
    except Busy as busy:
        named = [*targets, busy.target] if build.jobfile.pipeline else targets
        _say_busy([(busy.target, busy.reason, busy.job_id)], file, named, ran=ran)
        return EXIT_INVALID
    except KeyboardInterrupt:
        build.cancel_launched()
        raise
    return EXIT_OK


def _report(
    decisions: list[Decision], results: dict[str, Outcome], ledger: Ledger, *, show_summary: bool
) -> int:
    internal = failed = refused = False
    for decision in decisions:
        outcome = results.get(decision.target.name)
        if outcome is None:
            continue
        if outcome.record is not None:
            print(f"{outcome.record.id} {outcome.state}")
        if outcome.state != COMPLETE:
            internal |= outcome.internal
            refused |= outcome.refused or outcome.lost  # a job not known to have failed
            failed |= not (outcome.refused or outcome.internal or outcome.lost)
            if not outcome.lost:  # its output is the backend's, which does not answer
                _explain(outcome, ledger)
    if show_summary:
        for line in summary(decisions, results):
            say(line)
    for decision in decisions:
        outcome = results.get(decision.target.name)
        if outcome is not None and not outcome.running:  # said after, as a refusal is
            say(ending(outcome))
    if internal:  # the most severe first: taospec failed, a job failed, an input was refused
        return EXIT_INTERNAL
    if failed:
        return EXIT_JOB_FAILED
    return EXIT_INVALID if refused else EXIT_OK


def ending(outcome: Outcome) -> str:
    """One line for a finished target: state, duration, results; for a failure, why and
    where to read more."""
    record = outcome.record
    if record is None:
        return f"{outcome.name}: {outcome.state}" + (
            f"  {outcome.message}" if outcome.message else ""
        )
    state = f"{outcome.state} {record.err_class}" if record.err_class else outcome.state
    line = f"{outcome.name}: {state} in {ticker.elapsed(age(record))}  results {record.results_dir}"
    if outcome.state in (COMPLETE, CANCELED):
        return line
    if outcome.lost:
        return f"{line}  {outcome.message}"
    said = record.transitions[-1].message.splitlines()  # a failed step's command, output, why
    why = "; ".join(part.strip() for part in said if part.strip())
    return f"{line}  {why}; taospec logs {record.id}"


def _explain(outcome: Outcome, ledger: Ledger) -> None:
    record = outcome.record
    # the closing line says all there is, of a job that never launched (its submit failed) too
    if record is None or outcome.state == CANCELED or record.backend_ref is None:
        return
    tail = platforms.get(record.platform).log_tail(record, ledger.sidecar(record.id), TAIL_LINES)
    if tail.strip():
        say(f"last lines of {record.id}'s output:")
        for line in tail.rstrip("\n").split("\n"):  # redacted a line at a time, as logs does
            say(f"  | {line}")
    say(f"{record.id}: {record.transitions[-1].message}")
