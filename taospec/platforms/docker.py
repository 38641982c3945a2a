"""The docker platform: tao-run-on-docker's canonical detached launch.

The container is named and labelled after the job id, runs as the job's
UID:GID with a writable HOME and cache redirects under ``/results``, gets its
GPUs by id, and stays after it exits so that status and logs can read it.
"""

from __future__ import annotations

from taospec import identity, templates
from taospec.plan import CONTAINER_RESULTS, Context, Plan, Step, record_fields
from taospec.platforms.common import local_steps

NAME = "docker"
NGC_REGISTRY = "nvcr.io"
NGC_KEY = "NGC_KEY"


def job_results(results_dir: str) -> str:
    """The results directory is mounted at /results."""
    return CONTAINER_RESULTS


def gpu_flag(gpus: tuple[int | str, ...] | str) -> str:
    """``--gpus`` value: ``all`` or ``"device=0,1"`` with the literal quotes docker's CSV needs."""
    if gpus == "all":
        return "all"
    if not gpus:
        return ""
    return '"device=' + ",".join(str(g) for g in gpus) + '"'


def registry(image: str) -> str:
    """The registry host an image reference names (docker.io when it names none)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def values(context: Context) -> dict[str, object]:
    """What the docker templates are rendered with."""
    job = context.job
    return {
        "job_id": context.job_id,
        "image": job.image,
        "registry": registry(job.image),
        "gpus": gpu_flag(job.gpus),
        "ipc": job.docker.ipc,
        "shm_size": job.docker.shm_size,
        "user": context.identity,
        "results_dir": context.results_dir,
        "job_results": context.job_results,
        "mounts": job.mounts,
        "runtime_env": context.runtime_env(),
        "env_pass": job.env_pass,
        "env_set": context.env_set,
        "extra_args": job.docker.extra_args,
        "command": context.command,
    }


def engine_steps(context: Context, env: tuple[tuple[str, str], ...] = ()) -> list[Step]:
    """login (nvcr.io with NGC_KEY named), pull-if-missing and the detached launch."""
    job = context.job
    macros = templates.module("docker", values(context))
    present = templates.argv(macros.image_present())
    steps = []
    if registry(job.image) == NGC_REGISTRY and NGC_KEY in job.env_pass:
        steps.append(
            Step(
                "login",
                templates.argv(macros.login()),
                "log in to NGC with the key fed on stdin, unless the image is already here",
                env=env,
                unless=present,
                stdin_env=NGC_KEY,
            )
        )
    steps.append(
        Step("pull", templates.argv(macros.pull()), "pull the image unless the engine has it",
             env=env, unless=present)
    )
    steps.append(
        Step(
            "launch",
            templates.argv(macros.run()),
            "start the container detached, named and labelled after the job id",
            env=env,
        )
    )
    return steps


def plan(context: Context) -> Plan:
    """prepare, spec-file, (login,) pull, launch."""
    job = context.job
    identity.refuse_root(context.identity, job.file)
    host = job.docker.host
    env = (("DOCKER_HOST", host),) if host else ()
    notes = []
    if host:
        notes.append(
            f"the containers run on {host}: mount sources and results_root are paths on that "
            "host, not on this machine"
        )
    return Plan(
        file=job.file,
        target=job.name,
        platform=NAME,
        job_id=context.job_id,
        record=record_fields(context, NAME),
        steps=(*local_steps(context), *engine_steps(context, env)),
        notes=tuple(notes),
        backend=(("docker_host", host),) if host else (),
        secrets=job.env_pass,
    )
