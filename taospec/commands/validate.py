"""``taospec validate``: check job files, report every problem with its place.

A file found valid before, byte for byte and with the same taospec, is
known valid from :mod:`taospec.cache`; a file with problems is checked afresh.

Many files are checked in several processes at once (:mod:`taospec.workers`),
one per CPU by default, once the first file checked afresh has loaded what a
check needs; files the cache knows are answered at once and stay in this
process. Either way the output is the same, file by file in the order given.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from taospec.cache import check_valid, save_verdicts
from taospec.diagnostics import SpecError
from taospec.errors import EXIT_INVALID, EXIT_OK

SHARE = 16
"""By default, a worker process is started for every this many files left (up to one per CPU)."""


def run(files: Sequence[str], *, quiet: bool = False, jobs: int | None = None) -> int:
    """Validate each file; exit 2 if any has a problem.

    ``jobs`` is how many processes may check files at once (default: one per
    CPU when there are many files).
    """
    failed = 0
    try:
        for file, problem in zip(files, _problems(files, jobs), strict=True):
            if problem is not None:
                failed += 1
                print(problem, file=sys.stderr)
                continue
            if not quiet:
                print(f"{file}: ok")
    finally:
        save_verdicts()
    if failed:
        print(f"{failed} of {len(files)} job files are invalid", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def _check(file: str) -> tuple[str | None, bool]:
    """``file``'s problems as text (None when valid), and whether it was checked afresh."""
    try:
        fresh = check_valid(file)
    except SpecError as exc:
        return str(exc), True
    return None, fresh


def _problems(files: Sequence[str], jobs: int | None) -> Iterator[str | None]:
    """Each file's problems (None when valid), in order; in workers once a check has warmed up."""
    for index, file in enumerate(files):
        problem, fresh = _check(file)
        yield problem
        workers = _workers(len(files) - index - 1, jobs) if fresh else 1
        if workers > 1:
            yield from _in_workers(files[index + 1 :], workers)
            return


def _in_workers(files: Sequence[str], workers: int) -> Iterator[str | None]:
    """Each file's problems, in order, checked in ``workers`` forked processes."""
    from contextlib import closing

    from taospec.workers import ordered

    def work(index: int) -> str | None:
        return _check(files[index])[0]

    save_verdicts()  # before the workers are forked, or each would save this process's too
    answers = ordered(work, len(files), workers, files.__getitem__, finish=save_verdicts)
    with closing(answers):
        yield from answers


def _workers(count: int, jobs: int | None) -> int:
    """How many processes should check ``count`` files."""
    if jobs is not None:
        return min(jobs, count)
    from taospec.workers import cpus

    return min(cpus(), count // SHARE)
