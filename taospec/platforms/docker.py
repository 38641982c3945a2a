"""The docker platform: tao-run-on-docker's canonical detached launch.

The container is named and labelled after the job id, runs as the job's
UID:GID with a writable HOME and cache redirects under ``/results``, gets its
GPUs by id, and stays after it exits so that status and logs can read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from taospec import identity, proc, templates
from taospec.diagnose import PROGRAM, diagnose
from taospec.errors import CommandFailed
from taospec.jobstate import COMPLETE, ERROR, UNKNOWN, Status
from taospec.plan import CONTAINER_RESULTS, Context, Plan, Step, record_fields
from taospec.platforms.common import local_steps

if TYPE_CHECKING:
    from taospec.ledger import Record

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
        backend=_backend(host, gpu_flag(job.gpus).strip('"').removeprefix("device=")),
        secrets=job.env_pass,
    )


def _backend(host: str | None, gpus: str) -> tuple[tuple[str, str], ...]:
    facts = []
    if host:
        facts.append(("docker_host", host))
    if gpus:
        facts.append(("gpus", gpus))
    return tuple(facts)


# -- the verbs -------------------------------------------------------------

INSPECT_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"
_NATIVE = {"created": "PENDING", "restarting": "PENDING", "running": "RUNNING", "paused": "RUNNING"}


def engine_env(sidecar: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """DOCKER_HOST for a job that ran on a remote daemon."""
    host = sidecar.get("docker_host")
    return (("DOCKER_HOST", str(host)),) if host else ()


def backend_ref(result: proc.Result, job_id: str) -> str:
    """The container id ``docker run -d`` printed."""
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else job_id


def status(record: Record, sidecar: Mapping[str, object]) -> Status:
    """``docker inspect`` mapped to the vocabulary (facts: docker's states)."""
    env = engine_env(sidecar)
    inspected = proc.run(
        ["docker", "inspect", "--type", "container", "--format", INSPECT_FORMAT, record.id],
        extra_env=env,
        check=False,
    )
    if not inspected.ok:
        return _missing(record, env, inspected)
    native, code_text, oom = inspected.stdout.split()
    found = _label_lookup(record, env) if record.backend_ref is None else None
    code = int(code_text)
    if native in _NATIVE:
        return Status(_NATIVE[native], f"docker: {native}", found_ref=found)
    if native == "exited" and code == 0:
        return Status(COMPLETE, "docker: exited 0", 0, found_ref=found)
    if native == "exited":
        return _failed(record, env, code, oom == "true", found)
    return Status(UNKNOWN, f"docker: {native} (exit code {code}); see docker ps -a", code)


def _failed(
    record: Record, env: tuple[tuple[str, str], ...], code: int, oom: bool, found: str | None
) -> Status:
    message = f"docker: exited with code {code}"
    if oom:
        message += " (killed by the kernel's out-of-memory killer)"
    diagnosis = diagnose(log_tail(record, {"docker_host": dict(env).get("DOCKER_HOST")}))
    if diagnosis:
        message += f"; {diagnosis}"
    err_class = diagnosis.err_class if diagnosis else PROGRAM
    return Status(ERROR, message, code, err_class, found)


def _missing(record: Record, env: tuple[tuple[str, str], ...], inspected: proc.Result) -> Status:
    text = inspected.stderr.strip()
    if "No such" not in text and "no such" not in text:
        diagnosis = diagnose(text)
        reason = str(diagnosis) if diagnosis else text.splitlines()[-1] if text else "no answer"
        return Status(UNKNOWN, f"docker inspect failed: {reason}")
    listed = proc.run(
        ["docker", "ps", "-a", "--filter", f"label=tao-job={record.id}", "--format", "{{.ID}}"],
        extra_env=env,
        check=False,
    )
    if listed.ok and listed.stdout.strip():
        return Status(UNKNOWN, "docker: the container is listed but cannot be inspected")
    return Status(UNKNOWN, f"docker: no container named {record.id} (docker ps -a shows none)")


def _label_lookup(record: Record, env: tuple[tuple[str, str], ...]) -> str | None:
    listed = proc.run(
        ["docker", "ps", "-a", "--no-trunc", "--filter", f"label=tao-job={record.id}",
         "--format", "{{.ID}}"],
        extra_env=env,
        check=False,
    )
    ids = listed.stdout.split() if listed.ok else []
    return ids[0] if len(ids) == 1 else None


def log_tail(record: Record, sidecar: Mapping[str, object], lines: int = 50) -> str:
    """The last ``lines`` of the container's output ('' when there is none)."""
    result = proc.run(
        ["docker", "logs", "--tail", str(lines), record.id],
        extra_env=engine_env(sidecar),
        check=False,
    )
    return result.stdout + result.stderr if result.ok else ""


def logs(
    record: Record,
    sidecar: Mapping[str, object],
    *,
    tail: int | None,
    follow: bool,
    on_line: Callable[[str], None],
) -> int:
    """Stream ``docker logs``; returns its exit code."""
    argv = ["docker", "logs"]
    if tail is not None:
        argv += ["--tail", str(tail)]
    if follow:
        argv.append("--follow")
    return proc.stream([*argv, record.id], extra_env=engine_env(sidecar), on_line=on_line)


def cancel(record: Record, sidecar: Mapping[str, object]) -> str:
    """Remove the container (it is the job); a container already gone is fine."""
    result = proc.run(
        ["docker", "rm", "--force", record.id], extra_env=engine_env(sidecar), check=False
    )
    if result.ok:
        return "container removed"
    if "No such container" in result.stderr:
        return "no container was left"
    raise CommandFailed(proc.shown(result.argv), result.returncode, result.output())
