"""``taospec doctor``: print each preflight check and what to do about a failing one.

With a job file, the checks are those of each docker job's host (its engine,
image registry login, GPUs, results_root, shm_size, ``docker.host``); without
one, the local docker engine and client. :func:`job_checks` is also what
``taospec run`` asks (the cheap set) before it opens any record.
"""

from __future__ import annotations

from collections.abc import Sequence

from taospec import doctor
from taospec.doctor import Check
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK
from taospec.job import Job
from taospec.loader import load_jobfile

INDENT = "      "


def run(checks: list[Check]) -> int:
    """One line per check (``ok``/``FAIL``, name, detail), advice indented under a failure;
    exit 1 when any failed."""
    for check in checks:
        print(line(check))
        if not check.ok and check.advice:
            print(INDENT + check.advice)
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
    jobs = unique_docker_jobs([jobfile.targets[name].job for name in names])
    if not jobs:
        print(f"{file}: no docker job to check (taospec doctor checks docker hosts only)")
        return EXIT_OK
    code = EXIT_OK
    for job in jobs:
        if len(jobs) > 1:
            print(f"{job.name}:")
        code = max(code, run(job_checks(job, full=True)))
    return code


def unique_docker_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The docker jobs, one per distinct set of checked values."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for job in jobs:
        if job.platform == "docker" and key(job) not in seen:
            seen.add(key(job))
            out.append(job)
    return out


def key(job: Job) -> tuple[object, ...]:
    """What a docker job's checks depend on: equal keys, equal answers."""
    return (
        job.image,
        job.gpus,
        job.results_root,
        job.docker.shm_size,
        job.docker.ipc,
        job.env_pass,
        job.docker.host,
    )


def docker_env(job: Job) -> tuple[tuple[str, str], ...]:
    """The environment that points the docker CLI at the job's engine."""
    return (("DOCKER_HOST", job.docker.host),) if job.docker.host else ()


def job_checks(job: Job, *, full: bool) -> list[Check]:
    """The cheap (``run``) or full (``doctor``) checks for a docker job's host."""
    return doctor.host_checks(
        image=job.image,
        gpus="all" if job.gpus_free else job.gpus,
        results_root=job.results_root,
        shm_size=job.docker.shm_size,
        ipc=job.docker.ipc,
        env_pass=job.env_pass,
        docker_env=docker_env(job),
        full=full,
    )


def is_space_check(check: Check) -> bool:
    """Free space (results_root, docker's data root, /dev/shm): warned about by ``run``,
    never a reason to refuse it."""
    return check.name.endswith("free space") or check.name == doctor.SHM_PATH
