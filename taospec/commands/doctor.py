"""``taospec doctor``: print each preflight check and what to do about a failing one.

With a job file, the checks are those of each docker job's host (its engine,
image registry login, GPUs, results_root, shm_size, ``docker.host``); without
one, the local docker engine and client.
"""

from __future__ import annotations

from collections.abc import Sequence

from taospec import doctor
from taospec.doctor import Check
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK
from taospec.lint import redacted
from taospec.loader import load_jobfile

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
    """``taospec doctor [FILE [TARGETS]]``: the full checks for each docker job's host, or
    without a file the local engine's."""
    if file is None:
        return run([doctor.docker_client(), *doctor.engine_checks(())])
    jobfile = load_jobfile(file)
    names = jobfile.closure(tuple(targets))
    jobs = doctor.docker_jobs([jobfile.targets[name].job for name in names])
    if not jobs:
        print(f"{file}: no docker job to check (taospec doctor checks docker hosts only)")
        return EXIT_OK
    code = EXIT_OK
    with doctor.Engines(jobs) as engines:  # each engine asked once, all at once
        for job in jobs:
            if len(jobs) > 1:
                print(f"{job.name}:")
            code = max(code, run(doctor.job_checks(job, full=True, engines=engines)))
    return code
