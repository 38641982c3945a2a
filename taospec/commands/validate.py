"""``taospec validate``: check job files, report every problem with its place.

Many files are checked in a pool of worker processes (one per CPU by
default), forked once this process has checked the first file and so has
loaded everything a check needs. The output is the same either way: file by
file, in the order given. A versions.yaml given stands for the job files beside
it, which resolve their images in it: a change to it alone is checked where it
takes effect (the pre-commit hook passes it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from taospec import identity
from taospec.commands import ciformat
from taospec.diagnostics import Problem, SpecError, raise_if_any, shown_file
from taospec.errors import EXIT_INVALID, EXIT_OK, InvalidInput, TaospecError
from taospec.interrupts import INTERRUPTS
from taospec.lint import redacted, redacted_location
from taospec.loader import load_jobfile, load_located, shown_name
from taospec.versions import VERSIONS_FILE, job_files_beside
from taospec.yamlsrc import STDIN

SHARE = 16
"""By default, a worker process is started for every this many files (up to one per CPU)."""


def run(
    files: Sequence[str],
    *,
    quiet: bool = False,
    jobs: int | None = None,
    fmt: str = "text",
    here: bool = False,
    versions: str | None = None,
    user: str | None = None,
) -> int:
    """Validate each file; exit 2 if any has a problem.

    ``jobs`` is how many processes may check files at once (default: one per
    CPU when there are many files). ``fmt`` ``json`` prints one JSON object per
    file, ``github`` one GitHub Actions annotation per problem (both on stdout).
    ``here`` adds every check ``run`` makes on this machine
    (:mod:`taospec.preflight`); ``versions`` names the versions.yaml; ``user`` is
    ``--user`` as render and run take it, judged for each job as they judge it.
    """
    files = job_files(files)
    if here or versions is not None or user is not None or STDIN in files:
        # One at a time in this process: stdin is read once, and the checks ask this machine.
        answers: Iterator[tuple[Problem, ...]] = (
            _check_here(f, here, versions, user) for f in files
        )
    else:
        answers = _problems(files, jobs)
    failed = 0
    for file, problems in zip(files, answers, strict=True):
        failed += bool(problems)
        if fmt == "json":
            print(json.dumps(ciformat.file_json(shown_name(file), problems)))
        elif fmt == "github":
            for problem in problems:
                print(ciformat.github(file, problem))
        elif problems:
            print(SpecError(problems), file=sys.stderr)  # redacted line by line, part by part
        elif not quiet:
            print(f"{shown_file(redacted_location(shown_name(file)))}: ok")
    if failed:
        verb = "is" if failed == 1 else "are"
        print(f"{failed} of {len(files)} job files {verb} invalid", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def job_files(files: Sequence[str]) -> list[str]:
    """``files``, each versions.yaml as the job files beside it (``*.yaml``, ``*.yml``), each
    file once, in the order given."""
    out: dict[str, None] = {}
    for file in files:
        if Path(file).name != VERSIONS_FILE:
            out[file] = None
            continue
        folder = Path(file).parent
        names = (
            [path.name for path in folder.iterdir() if path.is_file()] if folder.is_dir() else []
        )
        for name in job_files_beside(names):
            out[str(folder / name)] = None
    return list(out)


def check(file: str) -> tuple[Problem, ...]:
    """``file``'s problems (none when it is valid)."""
    try:
        load_jobfile(file)
    except SpecError as exc:
        return exc.problems
    return ()


def _check_here(
    file: str, here: bool, versions: str | None, user: str | None
) -> tuple[Problem, ...]:
    """``file``'s problems, with this machine's (warnings are printed, and do not fail)."""
    try:
        jobfile, sources = load_located(file, versions=versions)
        if here:
            # Only --here renders plans: the platforms and templates load for it alone, so a
            # schema check of many files does not pay for them.
            from taospec import preflight

            verdict = preflight.here(jobfile, sources, user=user)
            for warning in verdict.warnings:
                print(redacted(warning), file=sys.stderr)
            raise_if_any(verdict.problems)
        elif user is not None:  # who each job runs as, judged as render judges it
            launcher = identity.launcher()
            refused: list[Problem] = []
            for name, target in jobfile.targets.items():
                try:
                    job = target.job
                    identity.resolve(job.user, user, launcher, platform=job.platform, file=job.file)
                except InvalidInput as refusal:
                    refused += sources[name].refusal(refusal).problems
            raise_if_any(refused)
    except SpecError as exc:
        return exc.problems
    return ()


def _problems(files: Sequence[str], jobs: int | None) -> Iterator[tuple[Problem, ...]]:
    """Each file's problems, in order."""
    if not files:
        return
    yield check(files[0])
    rest = files[1:]
    workers = _workers(len(rest), jobs)
    if workers <= 1:
        yield from map(check, rest)
        return
    # Only a pool pays for its modules (about a fifth of the start of a small validate).
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_leave_interrupts
    )
    try:
        # Interrupts are held back while the workers are forked and the pool's threads
        # start, so that no worker dies of one before it sets its own handling and the
        # pool is never left half started; this process gets them the moment it is up.
        # The pool's threads keep them blocked, so they always reach this thread.
        signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
        try:
            answers = pool.map(check, rest, chunksize=max(1, len(rest) // (workers * 8)))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)
        yield from answers
    except BrokenProcessPool:
        raise TaospecError("a validate worker process died; no verdict was given") from None
    finally:
        pool.shutdown(cancel_futures=True)


def _leave_interrupts() -> None:
    """A worker leaves Ctrl-C and a hangup to this process, which stops the pool and reports
    the interruption once, and dies of SIGTERM wherever it is.

    The pool stops what is left of it with SIGTERM when a worker dies; a worker that took
    it as Ctrl-C (this process's handler, inherited) sent it back as its files' answer,
    and could then wait for ever on a queue lock the dead worker held.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)


def _workers(count: int, jobs: int | None) -> int:
    """How many processes should check ``count`` files."""
    if jobs is not None:
        return min(jobs, count)
    return min(os.cpu_count() or 1, count // SHARE)
