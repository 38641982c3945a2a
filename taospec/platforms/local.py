"""The local platform: the job's command as a plain process on this machine.

The process runs in its own session (so cancel ends its whole group), in its
results directory, with an environment built from the spec alone: the same
HOME and cache redirects a container gets, ``env.set``, and the names in
``env.pass`` (plus PATH) copied from the launcher.
"""

from __future__ import annotations

from taospec import templates
from taospec.errors import InvalidInput
from taospec.plan import LOG_FILE, Context, Plan, Step, record_fields
from taospec.platforms.common import local_steps, owner

NAME = "local"


def job_results(results_dir: str) -> str:
    """A local process sees the results directory where it is."""
    return results_dir


def plan(context: Context) -> Plan:
    """prepare, spec-file, launch."""
    job = context.job
    switch = owner(context) is not None
    if switch and context.launcher.uid != 0:
        raise InvalidInput(
            f"{job.file}: user {context.identity.spec} differs from the launching user "
            f"{context.launcher.spec}; only root can start a process as another user"
        )
    macros = templates.module(
        "local", {"switch_user": switch, "user": context.identity, "command": context.command}
    )
    env = list(context.runtime_env())
    if isinstance(job.gpus, tuple) and job.gpus:
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in job.gpus)))
    env += context.env_set
    launch = Step(
        "launch",
        templates.argv(macros.run()),
        "start the command in its own session; output goes to the log file",
        env=tuple(env),
        pass_env=("PATH", *job.env_pass),
        clean_env=True,
        cwd=context.results_dir,
        log_path=f"{context.results_dir}/{LOG_FILE}",
    )
    return Plan(
        file=job.file,
        target=job.name,
        platform=NAME,
        job_id=context.job_id,
        record=record_fields(context, NAME),
        steps=(*local_steps(context), launch),
        secrets=job.env_pass,
    )
