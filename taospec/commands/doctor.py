"""``taospec doctor``: print each preflight check and what to do about a failing one.

With a job file, first what ``run`` would stop at on this machine (a mount
source missing here, a results_root that is not a folder), then the checks of
each docker job's host (its engine, image registry login, GPUs, results_root,
shm_size, ``docker.host``); without one, the local docker engine and client.
"""

from __future__ import annotations

from collections.abc import Sequence

from taospec import doctor, preflight
from taospec.diagnostics import shown_file, unique
from taospec.doctor import Check
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK
from taospec.lint import redacted
from taospec.loader import load_located

INDENT = "      "


def run(checks: list[Check]) -> int:
    """One line per check (``ok``/``FAIL``, name, detail), advice indented under a failure;
    exit 1 when any failed."""
    for check in checks:  # a detail quotes what the engine said: redacted, as all output is
        print(redacted(line(check)))
        if not check.ok and check.advice:
            print(redacted(INDENT + check.advice))
    return EXIT_OK if all(check.ok for check in checks) else EXIT_JOB_FAILED


def line(check: Check) -> str:
    """``ok    docker engine: version 20.10.24``."""
    mark = "ok" if check.ok else "FAIL"
    return f"{mark:<6}{check.name}: {check.detail}"


def verb(file: str | None, targets: Sequence[str] = ()) -> int:
    """``taospec doctor [FILE [TARGETS]]``: what ``run`` would stop at on this machine, then
    the full checks for each docker job's host; without a file the local engine's."""
    if file is None:
        return run([doctor.docker_client(), *doctor.engine_checks(None)])
    jobfile, sources = load_located(file)
    names = jobfile.closure(tuple(targets))
    roots: preflight.RootVerdicts = {}
    here = sorted(
        unique(
            problem
            for name in names
            for problem in preflight.on_this_machine(
                jobfile.targets[name].job, sources[name], roots=roots
            )
        )
    )
    for problem in here:  # each part of the line redacted as what it is
        print(f"{'FAIL':<6}{problem} (run stops here)")
    code = EXIT_JOB_FAILED if here else EXIT_OK
    jobs = doctor.docker_jobs([jobfile.targets[name].job for name in names])
    if not jobs:
        print(
            f"{shown_file(file)}: no docker job to check (taospec doctor checks docker hosts only)"
        )
        return code
    with doctor.Engines(jobs) as engines:  # each engine asked once, all at once
        for job in jobs:
            if len(jobs) > 1:
                print(f"{job.name}:")
            code = max(code, run(doctor.job_checks(job, full=True, engines=engines)))
    return code
