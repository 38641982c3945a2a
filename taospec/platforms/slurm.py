"""The slurm platform: one sbatch script per job, on a real Slurm cluster.

The plan writes the results tree, the spec file and the job's sbatch script
into the results directory (through ssh when ``slurm.login`` names a login
node: data and results live on a filesystem the cluster shares), checks the
script with ``bash -n``, writes the variables ``env.pass`` names to a mode-600
file that the script reads and deletes, and submits with ``sbatch
--parsable``. The Slurm job is named after the record's id, so an answer lost
on the way back is recovered by looking that name up (:func:`submit`).

Inside the allocation the command runs as ``slurm.container`` says: through
Pyxis (``srun --container-image``), as a ``docker run --init`` container that
the script removes however the job ends, or directly (``none``).
"""

from __future__ import annotations

import dataclasses
import io
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from taospec import proc, remote, settings, templates
from taospec.diagnose import INFRA, classify
from taospec.diagnostics import shown_file
from taospec.errors import CommandFailed, InvalidInput
from taospec.job import CONTAINER_RESULTS, PYXIS
from taospec.lint import redacted
from taospec.placeholders import JOB_ID
from taospec.plan import (
    LOG_FILE,
    Context,
    Plan,
    Step,
    job_plan,
)
from taospec.platforms.base import Launched, StepRunner, Write, last_lines
from taospec.platforms.common import (
    LOG_TAIL_BYTES,
    Unended,
    local_steps,
    output_lines,
    read_lines_through,
    read_through,
    read_until_ended,
    still_writing,
    tail_start,
    while_writing,
)
from taospec.platforms.docker import registry
from taospec.states import CANCELED, COMPLETE, ERROR, PENDING, RUNNING, UNKNOWN, Status

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record

NAME = "slurm"
SCRIPT_FILE = "taospec.sbatch"
ENV_FILE = ".tao-runtime/secrets.env"
PLAIN_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
"""What an #SBATCH value may hold: sbatch reads those lines itself, not through a shell."""
POLL_INTERVAL = 0.5
SSH_FAILED = 255
"""ssh's own exit code when it could not run the command at all."""


# -- the plan --------------------------------------------------------------


def plan(context: Context) -> Plan:
    """prepare, spec-file, script, check-script, (env-file,) launch."""
    job = context.job
    options = job.slurm
    login = options.login
    script_path = f"{context.results_dir}/{SCRIPT_FILE}"
    steps = [dataclasses.replace(step, argv=on(login, step.argv)) for step in local_steps(context)]
    steps.append(
        Step(
            "script",
            on(login, ("install", "-m", "0644", "/dev/stdin", script_path)),
            "write the sbatch script below into the results directory",
            stdin_text=script(context),
        )
    )
    steps.append(
        Step(
            "check-script",
            on(login, ("bash", "-n", script_path)),
            "check the script's syntax before anything is submitted",
        )
    )
    if job.env_pass:
        steps.append(env_file_step(context, login))
    steps.append(launch_step(context, login, script_path))
    return job_plan(
        context,
        NAME,
        steps,
        notes=notes(context),
        backend=[("login", login)] if login else [],
        teardown=[remove_env_file_step(context.results_dir, login)] if job.env_pass else [],
    )


def on(login: str | None, argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` as it runs where the Slurm commands run: here, or on ``login`` through ssh."""
    if login is None:
        return tuple(argv)
    return (*remote.ssh(login), remote.command(argv))


def env_file_step(context: Context, login: str | None) -> Step:
    """Write the passed variables' values (from this environment) to a mode-600 file."""
    names = ", ".join(context.job.env_pass)
    return Step(
        "env-file",
        on(login, ("install", "-m", "0600", "/dev/stdin", env_path(context.results_dir))),
        f"write {names} from this environment to a mode-600 file the job reads and deletes "
        "(the values are never shown, stored or put on a command line)",
        stdin_env_file=context.job.env_pass,
    )


def remove_env_file_step(results_dir: str, login: str | None) -> Step:
    """Delete the passed variables' file once the job has ended: a job Slurm ends before its
    script runs (an ``scancel`` from elsewhere, a failed node) never read nor deleted it."""
    return Step(
        "remove-env-file",
        on(login, ("rm", "-f", "--", env_path(results_dir))),
        "delete the passed variables' file, in case the job ended before its script read it",
    )


def launch_step(context: Context, login: str | None, script_path: str) -> Step:
    """``sbatch --parsable``; locally without the passed variables, so Slurm never stores them."""
    argv: tuple[str, ...] = ("sbatch", "--parsable", script_path)
    if login is None and context.job.env_pass:
        unset = [arg for name in context.job.env_pass for arg in ("-u", name)]
        argv = ("env", *unset, *argv)
    return Step(
        "launch",
        on(login, argv),
        "submit the script; Slurm names the job after the job id (an answer lost on the way "
        "back is recovered by that name, never by submitting again)",
    )


def env_path(results_dir: str) -> str:
    """The mode-600 file that carries the passed variables to the job."""
    return f"{results_dir}/{ENV_FILE}"


def notes(context: Context) -> tuple[str, ...]:
    """What a reviewer should know about where and how the job runs."""
    job = context.job
    options = job.slurm
    out = []
    if options.login:
        out.append(
            f"the Slurm commands run on {options.login} over ssh: results_root and mount "
            "sources are paths on the cluster's shared filesystem"
        )
    if isinstance(job.gpus, tuple) and job.gpus:
        out.append(
            f"Slurm chooses the GPUs: the job asks for {len(job.gpus)} per node "
            "(--gpus-per-node), whichever ids the scheduler gives it"
        )
    if options.container == PYXIS:
        out.append(
            "enroot pulls the image on the compute nodes with the registry credentials in "
            "~/.config/enroot/.credentials there, not with anything from this machine"
        )
    if options.container == "none":
        out.append(
            f"container: none runs the command on the node itself; {job.image} is "
            "recorded but not used"
        )
    return tuple(out)


# -- the sbatch script -----------------------------------------------------


def script(context: Context) -> str:
    """The job's sbatch script (see templates/slurm.j2)."""
    text: str = templates.module("slurm", script_values(context)).script()
    return text.rstrip("\n") + "\n"


def directive_values(context: Context) -> dict[str, templates.Shell]:
    """The #SBATCH values, each checked to be one plain word (so it needs no quoting)."""
    options = context.job.slurm
    values = {
        "job_name": context.job_id,
        "output": f"{context.results_dir}/{LOG_FILE}",
        "chdir": context.results_dir,
        "partition": options.partition or "",
        "account": options.account or "",
        "time": options.time or "",
    }
    return {name: _plain(name, value, context.job.file) for name, value in values.items()}


_DIRECTIVE_KEYS = {
    "output": ("results_root",),
    "chdir": ("results_root",),
    "partition": ("slurm", "partition"),
    "account": ("slurm", "account"),
    "time": ("slurm", "time"),
}
"""The job file's key each #SBATCH value comes from (the job name is the id)."""


def script_values(context: Context) -> dict[str, object]:
    """What templates/slurm.j2 is rendered with."""
    job = context.job
    options = job.slurm
    gpus_per_node = len(job.gpus) if isinstance(job.gpus, tuple) else 0
    runtime_env = [(k, v) for k, v in context.runtime_env() if k not in ("USER", "LOGNAME")]
    return {
        "shell": templates.Shell,
        "sbatch": directive_values(context),
        "job_id": context.job_id,
        "results_dir": context.results_dir,
        "job_results": context.job_results,
        "nodes": job.nodes,
        "multi_node": job.nodes > 1,
        "procs_per_node": gpus_per_node or 1,
        "cpus_per_task": options.cpus_per_task or 0,
        "gpus_per_node": gpus_per_node,
        "extra_sbatch": tuple(templates.Shell(line) for line in options.extra_sbatch),
        "runtime": options.container,
        "env_file": env_path(context.results_dir) if job.env_pass else "",
        "exports": (*runtime_env, *context.env_set),
        "env_pass": job.env_pass,
        "command": context.command,
        "image": job.image,
        "ipc": job.docker.ipc,
        "shm_size": job.docker.shm_size,
        "extra_args": job.docker.extra_args,
        "mounts": job.mounts,
        "pyxis_image": pyxis_image(job.image),
        "pyxis_mounts": pyxis_mounts(context),
    }


def _plain(name: str, value: str, file: str) -> templates.Shell:
    """``value`` as it stands in an #SBATCH line; refused unless it is one plain word."""
    text = value.replace(JOB_ID, "id")
    if text and not PLAIN_WORD.fullmatch(text):
        raise InvalidInput(
            f"{shown_file(file)}: the sbatch script cannot carry {name} {text!r}: #SBATCH lines "
            "are read by sbatch, not by a shell, so they take only letters, digits and _@+=:,./-",
            key=_DIRECTIVE_KEYS.get(name, ()),
        )
    return templates.Shell(value)


def pyxis_image(image: str) -> str:
    """An image reference the way enroot names it: ``registry#repository:tag``."""
    host = registry(image)
    if host == "docker.io" or not image.startswith(host + "/"):
        return image
    return f"{host}#{image[len(host) + 1 :]}"


def pyxis_mounts(context: Context) -> str:
    """``--container-mounts``: the results directory at /results, then the spec's mounts."""
    pairs = [f"{context.results_dir}:{CONTAINER_RESULTS}"]
    pairs += [f"{m.source}:{m.target}" + (":ro" if m.readonly else "") for m in context.job.mounts]
    return ",".join(pairs)


# -- submitting ------------------------------------------------------------


def backend_ref(result: proc.Result, job_id: str) -> str | None:
    """The Slurm job id ``sbatch --parsable`` printed (``id`` or ``id;cluster``), if any."""
    lines = result.stdout.strip().splitlines()
    first = lines[-1].split(";")[0].strip() if lines else ""
    return first if first.isdigit() else None


def submit(step: Step, plan: Plan, runner: StepRunner) -> Launched:
    """Submit; when sbatch's answer is lost, adopt the one job named after the record.

    Several jobs of that name stop the submission with their ids; none means
    nothing was submitted, and the attempt fails. Nothing is ever resubmitted.
    """
    result = runner.run_unchecked(step)
    found = backend_ref(result, plan.job_id) if result.ok else None
    if found is not None:
        return Launched(found)
    login = plan.backend_value("login")
    runner.progress(f"{plan.job_id}: sbatch gave no job id; looking for a job named {plan.job_id}")
    try:
        named = _named_jobs(plan.job_id, login)
    except CommandFailed as lookup:  # sbatch's own words say why it gave no id
        said = f"{result.output()}\n{lookup.output}"
        raise CommandFailed(lookup.command, lookup.returncode, said) from None
    ids = [job for job, *how in named if tuple(how) != REFUSED]
    if len(ids) == 1:
        runner.progress(
            f"{plan.job_id}: adopted Slurm job {ids[0]}, submitted before the answer was lost"
        )
        return Launched(ids[0])
    if ids:
        raise CommandFailed(
            proc.shown(step.argv),
            result.returncode,
            f"{result.output()}\nsbatch gave no job id, and {len(ids)} Slurm jobs are named "
            f"{plan.job_id} ({', '.join(ids)}): taospec adopts none of them and submits "
            f"nothing more; keep one or cancel them all (scancel {' '.join(ids)})",
        )
    _remove_env_file(plan.record.results_dir, login)
    why = (
        f"Slurm refused the job (it lists it as job {named[0][0]}, {' '.join(REFUSED)}, which "
        "never ran)"
        if named
        else f"no Slurm job is named {plan.job_id}"
    )
    raise CommandFailed(
        proc.shown(step.argv),
        result.returncode,
        f"{result.output()}\nsbatch gave no job id, and {why}: nothing was submitted",
    )


SLURM_FAILED = "FAILED"
"""Slurm's word for a job that ended with a non-zero exit code (not taospec's FAILED)."""
REFUSED = (SLURM_FAILED, "BadConstraints")
"""How squeue lists a job slurmctld refused at submit, when no node could ever give what it
asks ("Requested node configuration is not available"): sbatch prints no id for it."""


def jobs_named(name: str, login: str | None) -> list[str]:
    """Ids of the Slurm jobs named exactly ``name``: queued, running or recently ended."""
    return [job for job, *_ in _named_jobs(name, login)]


def _named_jobs(name: str, login: str | None) -> list[list[str]]:
    """The Slurm jobs named exactly ``name``, each as its id, state and reason."""
    argv = on(login, ("squeue", "--noheader", "--states=all", f"--name={name}",
                      "--format=%i %T %r"))  # fmt: skip
    result = proc.run(argv, check=False)
    if not result.ok:
        raise CommandFailed(
            proc.shown(argv),
            result.returncode,
            f"{result.output()}\n(cannot tell whether a job named {name} exists; look with "
            f"squeue -n {name} before submitting again)",
        )
    return [line.split(maxsplit=2) for line in result.stdout.splitlines() if line.strip()]


def partitions(login: str | None) -> list[str] | None:
    """The cluster's partitions, hidden ones too (``sinfo`` marks the default with ``*``),
    asked where the Slurm commands run; None when sinfo does not answer (sbatch then says
    why the cluster cannot take the job)."""
    listed = proc.run(on(login, ("sinfo", "--all", "--noheader", "--format=%P")), check=False)
    if not listed.ok:
        return None
    return list(dict.fromkeys(word.rstrip("*") for word in listed.stdout.split()))


def _remove_env_file(results_dir: str, login: str | None) -> None:
    """Delete the passed variables' file when no job will read it."""
    proc.run(remove_env_file_step(results_dir, login).argv, check=False)


# -- status ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Native:
    """What Slurm says about one job: its state word, how it exited, and why it waits."""

    state: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""


_STATES = {
    "PENDING": PENDING, "CONFIGURING": PENDING, "REQUEUED": PENDING, "REQUEUE_HOLD": PENDING,
    "REQUEUE_FED": PENDING, "RESIZING": PENDING,
    "RUNNING": RUNNING, "COMPLETING": RUNNING, "SUSPENDED": RUNNING, "STOPPED": RUNNING,
    "SIGNALING": RUNNING, "STAGE_OUT": RUNNING,
    "COMPLETED": COMPLETE,
    "FAILED": ERROR, "TIMEOUT": ERROR, "OUT_OF_MEMORY": ERROR, "DEADLINE": ERROR,
    "SPECIAL_EXIT": ERROR, "NODE_FAIL": ERROR, "BOOT_FAIL": ERROR,
    "CANCELLED": CANCELED, "PREEMPTED": CANCELED, "REVOKED": CANCELED,
}  # fmt: skip
"""Slurm's job states in TAO's vocabulary (facts.md section 10)."""
_INFRA_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
_WHY = {
    "TIMEOUT": "the job reached its time limit (slurm.time)",
    "OUT_OF_MEMORY": "the job ran out of memory",
    "DEADLINE": "the job reached its deadline",
    "NODE_FAIL": "a node of the job failed; submitting again may help",
    "BOOT_FAIL": "a node of the job failed to boot; submitting again may help",
}


_STUCK = {
    "PartitionConfig": "the partition's nodes cannot hold what it asks",
    "PartitionNodeLimit": "the partition does not allow that many nodes",
    "PartitionTimeLimit": "its time limit (slurm.time) is past the partition's",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "BadConstraints": "no node of the partition has what it asks",
    "DependencyNeverSatisfied": "a job it depends on ended so that it never can start",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "JobHeldAdmin": "an administrator holds it",
    "JobHeldUser": "it is held (scontrol release lets it go)",
    "InvalidAccount": "its account is not valid",
    "InvalidQOS": "its QOS is not valid",
}
"""Why a pending job waits, for the reasons time alone does not end: Slurm keeps it
pending until the cluster or the job changes."""


def parse_scontrol(text: str) -> Native | None:
    """``scontrol -o show job``: JobState, ExitCode (``3:0`` exit 3, ``0:15`` signal 15), Reason."""
    state = re.search(r"(?:^|\s)JobState=(\S+)", text)
    if state is None:
        return None
    code = re.search(r"(?:^|\s)ExitCode=(\d+):(\d+)", text)
    reason = re.search(r"(?:^|\s)Reason=(\S+)", text)
    return _native(
        state.group(1), code.groups() if code else None, reason.group(1) if reason else ""
    )


def parse_sacct(text: str) -> Native | None:
    """``sacct -n -X -P -o State,ExitCode``: the state's first word (``CANCELLED by 0``, ``+``)."""
    for line in text.splitlines():
        state, _, code = line.partition("|")
        words = state.split()
        if words:
            exit_pair = tuple(code.strip().split(":")) if ":" in code else None
            return _native(words[0].rstrip("+"), exit_pair, "")
    return None


def _native(state: str, code: Sequence[str] | None, reason: str) -> Native:
    exit_code = signal = None
    if code is not None and len(code) == 2 and all(part.isdigit() for part in code):
        exit_code, signal = int(code[0]), int(code[1])
    reason = "" if reason == "None" else reason
    return Native(state.upper(), exit_code, signal, reason)


SACCT = ("sacct", "--noheader", "--allocations", "--parsable2", "--format=State,ExitCode")


def query(slurm_id: str, login: str | None) -> Native | Status:
    """The job's state from ``scontrol``, else from ``sacct``; or why neither knows it
    (UNKNOWN, ``unreachable`` when the login node or the controller did not answer)."""
    shown = proc.run(on(login, ("scontrol", "-o", "show", "job", slurm_id)), check=False)
    native = parse_scontrol(shown.stdout) if shown.ok else None
    if native is not None:
        return native
    unanswered = _unanswered(shown.returncode, shown.output(), login)
    if unanswered:
        return Status(UNKNOWN, f"slurm: {unanswered}", unreachable=unanswered)
    accounted = proc.run(on(login, (*SACCT, "--jobs", slurm_id)), check=False)
    native = parse_sacct(accounted.stdout) if accounted.ok else None
    if native is not None:
        return native
    return Status(
        UNKNOWN,
        f"slurm: scontrol does not know job {slurm_id} ({_last_line(shown)}; a finished job "
        f"stays there for MinJobAge seconds) and sacct has no record of it "
        f"({_last_line(accounted)})",
    )


NO_CONTROLLER = "Unable to contact slurm controller"
"""What the Slurm commands say when slurmctld does not answer them."""


def _unanswered(code: int, said: str, login: str | None) -> str:
    """Which part of the cluster did not answer a Slurm command (what it said), and what to
    check; '' when the cluster answered."""
    lines = said.strip().splitlines()
    last = lines[-1] if lines else f"exit {code}, no output"
    if login is not None and code == SSH_FAILED and "timed out" in last:
        return (
            f"the Slurm login node {login} did not answer over ssh within "
            f"{remote.connect_timeout(login)} s ({last}): check that it is up and that "
            f"ssh -o BatchMode=yes {login} true works from this machine; if it is only slow to "
            "answer, give it a longer ConnectTimeout in ~/.ssh/config"
        )
    if login is not None and code == SSH_FAILED:
        return (
            f"the Slurm login node {login} does not answer over ssh ({last}): check that it is "
            f"up and that ssh -o BatchMode=yes {login} true works from this machine"
        )
    if NO_CONTROLLER not in said:
        return ""
    said = next(line for line in lines if NO_CONTROLLER in line)
    if login is not None:
        return (
            f"the Slurm controller (slurmctld) does not answer the Slurm commands on login node "
            f"{login} ({said}): check that slurmctld runs (scontrol ping there)"
        )
    return (
        f"the Slurm controller (slurmctld) does not answer the Slurm commands on this machine "
        f"({said}): check that slurmctld runs and that this machine's slurm.conf (or "
        "SLURM_CONF) names it (scontrol ping)"
    )


def _last_line(result: proc.Result) -> str:
    lines = result.output().splitlines()
    return lines[-1] if lines else f"exit {result.returncode}, no output"


def to_status(native: Native, tail: Callable[[], str] = lambda: "") -> Status:
    """``native`` in TAO's vocabulary; a failed job's log ``tail`` may say why."""
    state = _STATES.get(native.state, UNKNOWN)
    message = f"slurm: {native.state}"
    if state in (PENDING, RUNNING, UNKNOWN):
        message += f" ({native.reason})" if native.reason else ""
        if state == PENDING and native.reason in _STUCK:
            message += f": {_STUCK[native.reason]}; it waits until that changes"
        return Status(state, message)
    code = native.exit_code if not native.signal else None
    if native.signal:
        message += f", killed by signal {native.signal}"
    elif native.exit_code is not None and state != CANCELED:
        message += f", exit code {native.exit_code}"
    if native.state in _WHY:
        message += f": {_WHY[native.state]}"
    if state != ERROR:
        return Status(state, message, code)
    if native.state in _INFRA_STATES:
        return Status(ERROR, message, code, INFRA)
    diagnosis = classify(code, message, tail() if native.state == SLURM_FAILED else "")
    return Status(ERROR, f"{message}; {diagnosis}", code, diagnosis.err_class)


def _login(sidecar: Mapping[str, object]) -> str | None:
    login = sidecar.get("login")
    return str(login) if login else None


def _slurm_id(record: Record, login: str | None) -> tuple[str | None, str | None]:
    """The record's Slurm job id, and the same id when it was found by name (a lost mark)."""
    if record.backend_ref:
        return record.backend_ref, None
    ids = jobs_named(record.id, login)
    return (ids[0], ids[0]) if len(ids) == 1 else (None, None)


def status(record: Record, sidecar: Mapping[str, object]) -> Status:
    """``scontrol show job`` (or ``sacct``) mapped to the vocabulary (facts.md section 10).

    A record without a Slurm job id is looked up by name (a lost mark); when neither
    ``squeue`` nor ``sacct`` knows a job of that name, nothing was submitted: gone."""
    login = _login(sidecar)
    try:
        named = [record.backend_ref] if record.backend_ref else _named(record, login)
    except CommandFailed as failure:
        unanswered = _unanswered(failure.returncode, failure.output, login)
        return Status(UNKNOWN, f"slurm: {failure}", unreachable=unanswered)
    if not named:
        return Status(UNKNOWN, f"slurm: Slurm knows no job named {record.id}", gone=True)
    if len(named) > 1:
        return Status(UNKNOWN, f"slurm: no single job is named {record.id} ({', '.join(named)})")
    slurm_id = named[0]
    found = None if record.backend_ref else slurm_id
    native = query(slurm_id, login)
    if isinstance(native, Status):
        return native._replace(found_ref=found)
    result = to_status(native, lambda: log_tail(record, sidecar))
    return result._replace(found_ref=found)


def _named(record: Record, login: str | None) -> list[str]:
    """Ids of the Slurm jobs named after the record: in ``squeue`` (queued, running or
    ended less than MinJobAge ago), else in ``sacct`` since the day before the record was
    opened; a cluster that keeps no accounts has only ``squeue``'s answer."""
    ids = jobs_named(record.id, login)
    if ids:
        return ids
    from taospec.ledger.record import instant  # status alone needs the record's times

    since = (instant(record.submitted_at) - timedelta(days=1)).astimezone()
    argv = on(login, ("sacct", "--noheader", "--allocations", "--parsable2", "--format=JobID",
                      f"--name={record.id}", f"--starttime={since:%Y-%m-%d}"))  # fmt: skip
    accounted = proc.run(argv, check=False)
    if accounted.ok:
        return accounted.stdout.split()
    if "accounting storage is disabled" in accounted.output():
        return []
    raise CommandFailed(
        proc.shown(argv),
        accounted.returncode,
        f"{accounted.output()}\n(squeue knows no job named {record.id}; sacct cannot tell "
        "whether one ran)",
    )


# -- logs ------------------------------------------------------------------


FOLLOW_BLOCK = 1 << 20
"""The most of the output file one read of a follow takes (on a login node, one ssh): a
follow far behind the job reads it a block at a time, never all at once."""

_BLOCK_FROM = 'tail -c +"$2" -- "$1" 2>/dev/null | head -c "$3"'
"""On the login node: up to ``$3`` bytes of file ``$1`` from byte ``$2`` (1 its first)."""


def _block_from(path: str, offset: int, login: str | None) -> bytes:
    """Up to :data:`FOLLOW_BLOCK` bytes of the output file from ``offset`` on (none while it
    does not exist). Raises :class:`CommandFailed` when ssh to the login node failed."""
    if login is None:
        try:
            with Path(path).open("rb") as file:
                file.seek(offset)
                return file.read(FOLLOW_BLOCK)
        except FileNotFoundError:
            return b""
    argv = ("sh", "-c", _BLOCK_FROM, "sh", path, str(offset + 1), str(FOLLOW_BLOCK))
    return _read_on(login, argv) or b""


def _read_through(path: str, login: str | None, on_line: Write, writing: bool) -> bool:
    """Hand on each line of the output file as it is read, here a block at a time, on
    ``login`` as ssh brings it (a log of gigabytes is never held whole); the last, of a
    job still ``writing``, as :func:`while_writing` shows it. False while the file does not
    exist. Raises :class:`CommandFailed` when ssh to the login node failed."""
    if login is None:
        try:
            with Path(path).open("rb") as log:
                read_through(log, on_line, writing=writing)
        except FileNotFoundError:
            return False
        return True
    said: list[str] = []
    argv = on(login, ("cat", "--", path))

    def read(out: Write, _err: Write) -> int:
        return proc.stream(argv, on_line=out, on_error_line=said.append)

    code = read_lines_through(read, on_line, writing)
    if code == SSH_FAILED:  # the login node did not answer: not a missing file
        raise CommandFailed(proc.shown(argv), code, "".join(said))
    return code == 0


def _read_end(
    path: str, lines: int, held: bool, login: str | None, within: int | None = None
) -> Output | None:
    """The output file's last ``lines`` lines, as :func:`tail_start` finds them (``held``,
    ``within``), read back from its end; None while it does not exist. Raises
    :class:`CommandFailed` when ssh to the login node failed."""
    if login is None:
        try:
            with Path(path).open("rb") as file:
                start = tail_start(file, lines, held=held, within=within)
                file.seek(start)
                return Output(file.read(), start)
        except FileNotFoundError:
            return None
    if within is None:
        return _read_end_on(login, path, lines, held)
    data = _read_on(login, ("tail", "-c", str(within), "--", path))
    if data is None or len(data) < within:  # all of the file
        return None if data is None else Output(data)
    return Output(data[data.find(b"\n") + 1 :] if b"\n" in data else b"", None)


_SIZE_AND_END = (
    'size=$(wc -c < "$1") || exit 1; echo $size; skip=$((size > $2 ? size - $2 : 0)); '
    'tail -c +$((skip + 1)) -- "$1" | head -c $((size - skip))'
)
"""On the login node: the size of file ``$1`` on a line, then its last ``$2`` bytes up to
that size, however much the job writes meanwhile."""


def _read_end_on(login: str, path: str, lines: int, held: bool) -> Output | None:
    """The output file's last ``lines`` lines on ``login``, and where in the file they begin
    (a follow goes on from there): its size and its bytes up to that size are read in one
    ssh, from a window at the end that grows until it holds them, or the whole file."""
    window = LOG_TAIL_BYTES
    while True:
        answer = _read_on(login, ("sh", "-c", _SIZE_AND_END, "sh", path, str(window)))
        if answer is None:
            return None
        size, _, data = answer.partition(b"\n")
        skipped = max(int(size) - window, 0)
        at = tail_start(io.BytesIO(data), lines, held=held)
        if at or not skipped:  # past a line end, so the lines are whole
            return Output(data[at:], skipped + at)
        window *= 4


class Output(NamedTuple):
    """Bytes read of the output file, and where in it they begin (None: not known, as of
    the last bytes ``tail -c`` gives on the login node)."""

    data: bytes
    start: int | None = 0


def _read_on(login: str, argv: Sequence[str]) -> bytes | None:
    """What ``argv`` (a read of the output file) prints on ``login``; None when it failed
    (no such file). Raises :class:`CommandFailed` when ssh to the login node failed."""
    argv = on(login, argv)
    code, data, said = proc.read_bytes(argv)
    if code == SSH_FAILED:  # the login node did not answer: not a missing file
        raise CommandFailed(proc.shown(argv), code, redacted(said.strip()))
    return data if code == 0 else None


def log_tail(
    record: Record, sidecar: Mapping[str, object], lines: int = 50, writing: bool = False
) -> str:
    """The last ``lines`` of the job's output file ('' when there is none), of those its
    last 64 KiB hold whole; of a job still ``writing``, as a look shows them."""
    try:
        path = f"{record.results_dir}/{LOG_FILE}"
        found = _read_end(path, lines, writing, _login(sidecar), LOG_TAIL_BYTES)
    except CommandFailed:
        return ""
    if not found:
        return ""
    shown = output_lines(found.data.decode(errors="replace"))
    return "".join(last_lines(while_writing(shown) if writing else shown, lines))


def logs(
    record: Record,
    sidecar: Mapping[str, object],
    *,
    tail: int | None,
    follow: bool,
    on_line: Callable[[str], None],
    on_said: Write | None = None,  # what reads the output never writes into it
    on_part: Write | None = None,
) -> int:
    """Print the output file (its last ``tail`` lines, read back from its end, here or on
    the login node; all of it a part at a time, :func:`_read_through`); with ``follow``,
    until the job ends, and to ``on_part``, when given, a line being redrawn in place as it
    is (:func:`redrawn_at`)."""
    login = _login(sidecar)
    path = f"{record.results_dir}/{LOG_FILE}"
    writing = not follow and still_writing(record, lambda: status(record, sidecar))
    if tail is None and not follow:  # all of it, never held whole
        try:
            if not _read_through(path, login, on_line, writing):
                on_line(f"(no output yet at {path})\n")
        except CommandFailed as failure:
            return failure.returncode
        return 0
    try:  # all of it, followed: from its start, a block at a time (_follow)
        # a last line not ended is one of the last, unless the job may still go on with it
        held = writing or (follow and still_writing(record, lambda: status(record, sidecar)))
        found = None if tail is None else _read_end(path, tail, held, login)
    except CommandFailed as failure:  # the caller asks status which part did not answer
        return failure.returncode
    if found is None and not follow:
        on_line(f"(no output yet at {path})\n")
        return 0
    data, start = found or Output(b"")
    ended = data.rfind(b"\n") + 1 if follow else len(data)  # the line still being written
    shown = output_lines(data[:ended].decode(errors="replace"))  # is followed, to its end
    for line in last_lines(while_writing(shown) if writing else shown, tail):
        on_line(line)
    if follow and start is not None:
        _follow(record, sidecar, path, start + ended, on_line, on_part=on_part)
    return 0


def _follow(
    record: Record,
    sidecar: Mapping[str, object],
    path: str,
    offset: int,
    on_line: Callable[[str], None],
    *,
    on_part: Write | None = None,
) -> None:
    """Hand on each new line until the job has ended, then whatever is left, as
    :class:`~taospec.platforms.common.Unended` does (a line longer than it holds, in
    parts; to ``on_part``, one not ended yet through its last ``\\r``)."""
    login = _login(sidecar)

    def read() -> bytes:
        nonlocal offset
        try:
            more = _block_from(path, offset, login)
        except CommandFailed:  # not now: the job's status decides when to stop
            return b""
        offset += len(more)
        return more

    def ended() -> bool:
        return status(record, sidecar).state not in (PENDING, RUNNING)

    unended = Unended(on_line, on_part)
    read_until_ended(ended, read, unended.take, POLL_INTERVAL)
    unended.end()


# -- cancel ----------------------------------------------------------------


def cancel(record: Record, sidecar: Mapping[str, object]) -> str:
    """``scancel``, then wait until the job's processes (and container) are gone.

    A job that had already ended is reported as such; that is not an error.
    """
    login = _login(sidecar)
    slurm_id, _ = _slurm_id(record, login)
    if slurm_id is None:
        _remove_env_file(record.results_dir, login)
        return f"no single Slurm job is named {record.id}; nothing to cancel"
    before = query(slurm_id, login)
    if isinstance(before, Native) and _STATES.get(before.state) not in (PENDING, RUNNING):
        _remove_env_file(record.results_dir, login)
        return f"Slurm job {slurm_id} had already ended ({before.state})"
    argv = on(login, ("scancel", slurm_id))
    result = proc.run(argv, check=False)
    if not result.ok:
        raise CommandFailed(proc.shown(argv), result.returncode, result.output())
    after = _wait_until_gone(slurm_id, login)
    _remove_env_file(record.results_dir, login)
    return f"scancel {slurm_id}; the job ended {after}"


def _wait_until_gone(slurm_id: str, login: str | None) -> str:
    """Wait (bounded) while the job still runs or completes; its last state word."""
    wait = settings.seconds(settings.SLURM_CANCEL_WAIT)
    deadline = time.monotonic() + wait
    native = query(slurm_id, login)
    while isinstance(native, Native) and _STATES.get(native.state) in (PENDING, RUNNING):
        if time.monotonic() > deadline:
            return f"{native.state} (still not gone after {wait:.0f} s)"
        time.sleep(POLL_INTERVAL)
        native = query(slurm_id, login)
    return native.state if isinstance(native, Native) else "(no longer known to Slurm)"
