"""Submit a plan: record first, then run its steps exactly as rendered.

The plan is the only input. :func:`submit` opens the job record (minting the
id and binding the results directory), substitutes the id into the reviewed
plan, runs each step in order, and marks the record RUNNING with the
backend's handle. Any failure before that marks the record ERROR with what
went wrong and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shlex
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from taospec import gpupick, interrupts, lint, platforms, proc, remote, settings
from taospec.diagnose import INFRA, cannot_start, classify, folder_gone
from taospec.diagnostics import shown_file
from taospec.durable import flocked
from taospec.errors import CommandFailed, InvalidInput, JobFailed, TaospecError
from taospec.job import Job
from taospec.ledger import Ledger, Record, TerminalStateError, WriteFailed
from taospec.ledger.record import now
from taospec.placeholders import stand_in
from taospec.plan import FAILED, GPU_IDS, Plan, Step, plan_from_json
from taospec.platforms import brev, docker
from taospec.platforms.base import EndedFirst, Platform
from taospec.states import CANCELED, COMPLETE, ERROR, PENDING, RUNNING, Status, answered

Progress = Callable[[str], None]


def secret_values(names: tuple[str, ...]) -> list[str]:
    """The values of the passed variables, which must never be written anywhere."""
    return [os.environ[name] for name in names if os.environ.get(name)]


def check_environment(job: Job, environ: Mapping[str, str]) -> None:
    """Every name the job passes must be set, or the job would start with an empty value.

    Brev reads the passed variables on the instance, where its plan checks them.
    """
    if job.platform == "brev":
        return
    missing = [name for name in job.env_pass if name not in environ]
    if missing:
        names = ", ".join(missing)
        raise InvalidInput(
            f"{shown_file(job.file)}: env.pass names {names}, but this environment does not set "
            f"{'it' if len(missing) == 1 else 'them'}; export {names} before submitting "
            "(the value is passed by name and never written down)"
        )


def check_gpus(plan: Plan, ledger: Ledger) -> None:
    """Refuse GPU ids that a RUNNING job on the same docker host already holds: one of this
    ledger, or (docker) any running container of the engine that holds GPUs."""
    wanted = plan.backend_value("gpus")
    if not wanted:
        return
    host = _gpu_host(dict(plan.backend))
    where = host or "the local engine"
    for holder, held in ledger_gpus(ledger, host).items():
        if _overlap(wanted, held):
            raise InvalidInput(
                f"{shown_file(plan.file)}: GPUs {wanted} overlap GPUs {held} of {holder} on "
                f"{where}; pick free ids, wait for it, or pass --allow-shared-gpus"
            )
    if plan.platform != "docker":
        return
    for container in engine_gpus(dict(plan.backend)):
        if _overlap(wanted, container.gpus):
            raise InvalidInput(
                f"{shown_file(plan.file)}: GPUs {wanted} overlap GPUs {container.gpus} of running "
                f"container {container.name} ({container.whose()}) on {where}; pick free "
                "ids, wait for it, or pass --allow-shared-gpus"
            )


@contextlib.contextmanager
def claimed_gpus(
    plan: Plan,
    ledger: Ledger,
    *,
    allow_shared: bool = False,
    progress: Progress = lambda _: None,
) -> Iterator[tuple[Plan, dict[str, object], Callable[[], None]]]:
    """The GPU critical section of a submit (:func:`gpu_lock`): the plan with the GPUs of
    ``gpus: {free: N}`` picked (:func:`choose_gpus`), checked for overlap unless
    ``allow_shared``, the sidecar notes that say which were chosen, and what ends the
    section: called once the record is open, whose PENDING state holds the GPUs from then
    on (:func:`ledger_gpus`), so that the plan's steps (a pull of many gigabytes) keep no
    other submit of the machine waiting."""
    with gpu_lock(plan, ledger) as release:
        plan, notes = choose_gpus(plan, ledger, progress)
        if not allow_shared:
            check_gpus(plan, ledger)
        yield plan, notes, release


def choose_gpus(
    plan: Plan, ledger: Ledger, progress: Progress = lambda _: None
) -> tuple[Plan, dict[str, object]]:
    """For a plan whose GPUs are picked at submit (``$GPU_IDS``): the N GPUs of its host
    that no running job holds (this ledger's on the same host or brev instance, and on
    docker the engine's containers), using the least memory by ``nvidia-smi`` there; the
    plan with them filled in."""
    count = plan.backend_value("gpus_free")
    if not count or stand_in(GPU_IDS) not in (plan.backend_value("gpus") or ""):
        return plan, {}
    host = _gpu_host(dict(plan.backend))
    holders = list(ledger_gpus(ledger, host).items())
    if plan.platform == "docker":
        holders += [
            (f"container {c.name} ({c.whose()})", c.gpus) for c in engine_gpus(dict(plan.backend))
        ]
    gpus = host_gpus(plan, progress)
    held: dict[str, str] = {}
    for holder, ids in holders:
        for gpu in [g.index for g in gpus] if ids == "all" else ids.split(","):
            held.setdefault(gpu, holder)
    try:
        chosen = ",".join(gpupick.pick(gpus, int(count), held))
    except gpupick.NoFreeGpus as short:
        raise gpupick.NoFreeGpus(
            f"{shown_file(plan.file)}: gpus: {{free: {count}}}: {short}"
        ) from None
    return plan.with_value(GPU_IDS, chosen), {"gpus_chosen": chosen}


def host_gpus(plan: Plan, progress: Progress = lambda _: None) -> tuple[gpupick.Gpu, ...]:
    """The GPUs of the host that runs the plan's job, and their memory use: ``nvidia-smi``
    here, over ssh, or on the job's brev instance through ``brev exec`` (tried until the
    instance answers, as its probe is)."""
    instance = plan.backend_value("instance")
    if not instance:
        return gpupick.query(_nvidia_smi_prefix(plan))
    try:
        answered = run_step(brev.gpu_query(instance), os.environ, progress)
    except CommandFailed as failure:
        raise InvalidInput(
            f"{shown_file(plan.file)}: gpus: {{free: N}}: cannot read GPU occupancy on brev "
            f"instance {instance}: {failure}"
        ) from None
    return gpupick.answer(answered.stdout)


def _nvidia_smi_prefix(plan: Plan) -> tuple[str, ...]:
    """How to run ``nvidia-smi`` on the host that runs the job: here, or through ssh."""
    facts = dict(plan.backend)
    if docker.on_this_machine(facts):
        return ()
    host = plan.backend_value("docker_host") or ""
    if host.startswith("ssh://"):
        return remote.ssh_argv(host)
    through = host or f"docker context {plan.backend_value('docker_context')}"
    raise InvalidInput(
        f"{shown_file(plan.file)}: gpus: {{free: N}} reads GPU occupancy with nvidia-smi on the "
        f"host, which taospec cannot reach through {through}; use an ssh:// docker.host or "
        "name the ids"
    )


def ledger_gpus(ledger: Ledger, host: str) -> dict[str, str]:
    """GPU ids (``0,1`` or ``all``) each job of this ledger holds on ``host``, by who holds
    them: a RUNNING job, and a PENDING one whose launch may still come (the taospec that
    opened it, or a launch it started, runs; or it was opened on another machine).

    A ledger may be shared by machines (a state folder on NFS): a job another machine
    opened for its own engine or processes (``host`` ``''``) holds that machine's GPUs.
    """
    held = {}
    here = os.uname().nodename
    for record in ledger.list():
        if record.state not in (RUNNING, PENDING):
            continue
        side = ledger.sidecar(record.id)
        gpus = str(side.get("gpus") or "")
        if not gpus or _gpu_host(side) != host:
            continue
        if not host and _opened_on(side) not in (here, None):
            continue  # the GPUs of the machine that opened it
        if record.state == RUNNING:
            held[f"running job {record.id}"] = gpus
        elif launch_alive(side.get(SUBMITTER), record.id) is not False:
            held[f"job {record.id}, launching"] = gpus
    return held


def _opened_on(sidecar: Mapping[str, object]) -> object:
    """The machine whose taospec opened the job (:data:`SUBMITTER`), None if not known."""
    note = sidecar.get(SUBMITTER)
    return note.get("host") if isinstance(note, dict) else None


OWNER_LABEL = "tao-owner"
"""The label naming who submitted a taospec container (``tao-job`` names its job)."""
JOB_LABEL = "tao-job"
ENGINE_FORMAT = (
    "{{json .HostConfig.DeviceRequests}}\t{{json .Config.Labels}}\t{{json .Config.User}}\t{{.Name}}"
)


@dataclass(frozen=True, slots=True)
class Container:
    """A running container of the engine that holds GPUs (``gpus``: ``0,1`` or ``all``)."""

    name: str
    gpus: str
    job: str | None
    owner: str | None
    user: str

    def whose(self) -> str:
        """Who it belongs to, as well as the engine can say."""
        parts = [f"job {self.job}"] if self.job else []
        if self.owner:
            parts.append(f"owner {self.owner}")
        else:
            parts.append(f"user {self.user or 'root'}, no {OWNER_LABEL} label")
        return ", ".join(parts)


def engine_gpus(facts: Mapping[str, object]) -> list[Container]:
    """The running containers that hold GPUs of the engine a plan's ``facts`` name: any with
    a GPU device request, taospec's (label ``tao-job``) from any ledger included."""
    env = docker.engine_env(facts)
    listed = proc.run(["docker", "ps", "-q", "--no-trunc"], extra_env=env, check=False)
    if not listed.ok:
        raise InvalidInput(
            f"cannot list the running containers of {_gpu_host(facts) or 'the local engine'} to "
            f"check their GPUs: {listed.output() or 'docker ps failed'}; pass "
            "--allow-shared-gpus to skip the check"
        )
    return inspect_gpus(listed.stdout.split(), env)


def inspect_gpus(ids: list[str], env: tuple[tuple[str, str], ...] = ()) -> list[Container]:
    """Of the containers ``ids``, those that hold GPUs, with what their labels say."""
    if not ids:
        return []
    argv = ["docker", "inspect", "--type", "container", "--format", ENGINE_FORMAT, *ids]
    inspected = proc.run(argv, extra_env=env, check=False)
    # A container that ended between the two calls is missing from the answer: it holds nothing.
    return [c for c in map(_container, inspected.stdout.splitlines()) if c is not None]


def _container(line: str) -> Container | None:
    requests_text, labels_text, user_text, name = [*line.split("\t"), "", "", ""][:4]
    try:
        requests = json.loads(requests_text) or []
        labels = json.loads(labels_text) or {}
        user = json.loads(user_text) or ""
    except ValueError:
        return None
    gpus = _requested_gpus(requests)
    if not gpus:
        return None
    return Container(
        name.lstrip("/"), gpus, labels.get(JOB_LABEL), labels.get(OWNER_LABEL), str(user)
    )


def _requested_gpus(requests: list[dict[str, object]]) -> str:
    """The GPU ids device requests claim: ``all`` for a count of -1, the first N for N."""
    ids: list[str] = []
    for request in requests:
        if not isinstance(request, dict) or not _gpu_request(request):
            continue
        named = request.get("DeviceIDs") or []
        count = request.get("Count") or 0
        if isinstance(count, int) and count < 0:
            return "all"
        ids += [str(i) for i in named] if isinstance(named, list) else []
        ids += [str(i) for i in range(count)] if isinstance(count, int) else []
    return ",".join(dict.fromkeys(ids))


def _gpu_request(request: dict[str, object]) -> bool:
    capabilities = request.get("Capabilities")
    groups = capabilities if isinstance(capabilities, list) else []
    flat = [c for group in groups if isinstance(group, list) for c in group]
    return request.get("Driver") in ("nvidia", "") or "gpu" in flat


def _gpu_host(facts: Mapping[str, object]) -> str:
    """The machine whose GPUs a job holds: its docker host or context, its brev instance,
    or '' (this machine)."""
    if facts.get("instance"):
        return f"brev instance {facts['instance']}"
    if docker.on_this_machine(facts):
        return ""
    return str(facts.get("docker_host") or f"docker context {facts.get('docker_context')}")


@contextlib.contextmanager
def gpu_lock(plan: Plan, ledger: Ledger) -> Iterator[Callable[[], None]]:
    """One claim at a time per machine whose GPUs the plan claims: from the GPU pick and the
    overlap check until the record that holds them is open (``<state>/taospec/gpus-<host
    hash>.lock``, an exclusive flock), which the function it gives ends (else the block).
    This machine's own GPUs are named by its host name: machines sharing a state folder
    each claim theirs without waiting for the others."""
    if not plan.backend_value("gpus"):
        yield lambda: None
        return
    host = _gpu_host(dict(plan.backend)) or f"host {os.uname().nodename}"
    digest = hashlib.sha256(host.encode()).hexdigest()[:16]
    with contextlib.ExitStack() as held:
        with recorded_first(ledger, NOT_LAUNCHED):
            held.enter_context(
                flocked(f"{ledger.root}/taospec/gpus-{digest}.lock", 0o600, parents=True)
            )
        yield held.close


def _overlap(a: str, b: str) -> bool:
    if "all" in (a, b):
        return True
    return bool(set(a.split(",")) & set(b.split(",")))


@dataclass(frozen=True, slots=True)
class Submission:
    """A submitted job: its record and the plan that ran, with the real id."""

    record: Record
    plan: Plan


def submit(
    plan: Plan,
    ledger: Ledger,
    *,
    sidecar: Mapping[str, object] | None = None,
    progress: Progress = lambda _: None,
    on_running: Callable[[Record], None] = lambda _: None,
    retry_of: str | None = None,
    stopping: Callable[[], bool] = lambda: False,
    opened: Callable[[Record], None] = lambda _: None,
) -> Submission:
    """Open the record, run the plan's steps, mark RUNNING. Raises :class:`SubmitFailed`
    when a step fails (the record then says ERROR and why). ``opened(record)`` runs once
    the record exists, before any step (a build notes the job there, and ends the critical
    section that decided to open it).

    An interrupt (KeyboardInterrupt: Ctrl-C, SIGTERM, SIGHUP) that arrives once the open
    has begun cancels the job (one during the open waits for it to end, so that no record
    is left that nothing will close); from ``on_running(record)`` on, the caller owns it.
    A submit in a worker thread never sees the interrupt, which Python raises in
    the main thread: ``stopping()`` says the run is being cancelled, and then no
    further step starts and a step that fails (its process got the signal too)
    is the interrupt, not the job's failure. ``retry_of`` names the job this one
    retries (the record's ``retry_of``).
    """
    env = dict(os.environ)
    engine = docker.opened_facts(plan, env)  # refused before anything is written
    results_root = plan.record.results_dir.rsplit("/", 1)[0]
    submitter = {
        **this_process(),
        # the group the launch's processes (docker run, sbatch) run in, outliving taospec
        "pgid": os.getpgrp(),
        "group_start": proc.start_time(os.getpgrp()),
    }
    fields = plan.record
    record: Record | None = None
    try:
        # An interrupt that arrives while the record is opened is raised once the open
        # is over: the record is then known, and cancelled below, or was never written.
        with interrupts.deferred(), recorded_first(ledger, NOT_LAUNCHED):
            record = ledger.open(
                platform=fields.platform,
                image=fields.image,
                network_arch=fields.network_arch,
                action=fields.action,
                storage_tier=fields.storage_tier,
                results_root=results_root,
                upload_excludes=fields.upload_excludes,
                retry_of=retry_of,
                sidecar={
                    **(sidecar or {}),
                    **engine,
                    **dict(plan.backend),
                    "plan_digest": plan.digest(),
                    SUBMITTER: submitter,
                },
                sidecar_for=lambda job_id: {"plan": plan.with_job_id(job_id).to_json()},
                message=f"opened by taospec for {plan.file} (target {plan.target})",
            )
        real = plan.with_job_id(record.id)
        try:
            with recorded_first(ledger, NOT_LAUNCHED):
                opened(record)
            _check_room(ledger, record)
        except NoRoom:
            raise  # recorded ERROR, and why
        except Exception as unlaunched:  # no step has started: nothing is left that could launch
            with contextlib.suppress(TaospecError):
                ledger.mark(record.id, ERROR, message=_before_launch(unlaunched), err_class=INFRA)
            raise
        progress(f"{record.id}: opened record, results in {record.results_dir}")
        try:
            ref = _run_steps(real, record, ledger, env, progress, stopping=stopping)
        except _Ended as ended:
            raise JobFailed(f"{record.id}: {ended}; nothing was launched") from None
        except _Stopped:
            raise SubmitInterrupted(_interrupted(ledger, record)) from None
        except CommandFailed as failure:
            if stopping() or _killed_by_signal(failure.returncode):
                raise SubmitInterrupted(_interrupted(ledger, record)) from None
            failed = _mark_failed(ledger, record, failure)
            raise SubmitFailed(f"{record.id}: {failure}", failed) from None
        try:
            marked = _mark_running(ledger, record, ref)
        except TerminalStateError:
            raise JobFailed(_stop_late_launch(ledger, record.id, ref)) from None
        progress(f"{record.id}: RUNNING ({ref})")
        on_running(marked)
    except KeyboardInterrupt:
        if record is not None:
            _interrupted(ledger, record)
        raise
    return Submission(marked, real)


def _before_launch(failed: Exception) -> str:
    """What a record says of a submit that failed once it was open, before any step."""
    if isinstance(failed, TaospecError):
        return str(failed)
    return f"taospec failed before launching ({type(failed).__name__}: {failed}); {NOT_LAUNCHED}"


def this_process() -> dict[str, object]:
    """This taospec process, as a note that :func:`launch_alive` reads: pid, host, start."""
    return {
        "pid": os.getpid(),
        "host": os.uname().nodename,  # gethostname(), without importing socket
        "start": proc.start_time(os.getpid()),
    }


SUBMITTER = "submitter"
"""Sidecar note: the pid, host and start time of the taospec process that opened the record,
and its process group (``pgid``, its leader's ``group_start``)."""
CANCEL_NOTE = "cancel_requested"
"""Sidecar note: when a cancel began (written before anything is stopped or removed)."""
CANCEL_FAILED = "cancel_failed"
"""Sidecar note: why the cancel :data:`CANCEL_NOTE` dates failed while the job went on (or
while its backend could not say), so the job's own later end is not taken for that cancel's."""


def cancel_began(sidecar: Mapping[str, object]) -> object:
    """When a cancel under way began; None when none began or the last one failed."""
    return None if sidecar.get(CANCEL_FAILED) else sidecar.get(CANCEL_NOTE)


ROOM_RECORDS = 16
"""Free space for this many more record-sized writes is required in the state folder
before a launch, so that the RUNNING and terminal marks can be written after it."""
ROOM_MIN_BYTES = 256 * 1024


def launch_alive(note: object, job_id: str) -> bool | None:
    """Whether the job may still be launched by what a :data:`SUBMITTER` note names: the
    taospec process runs, or a process of its group whose arguments name the job (the
    ``docker run`` or ``sbatch`` it started, which a killed taospec leaves running). None:
    unknown, e.g. it ran on another host."""
    if not isinstance(note, dict) or note.get("host") != os.uname().nodename:
        return None
    pid, group = note.get("pid"), note.get("pgid")
    if not isinstance(pid, int):
        return None
    if proc.alive(pid, note.get("start")):
        return True
    return isinstance(group, int) and proc.group_names(group, note.get("group_start"), job_id)


NOT_LAUNCHED = "nothing was launched"
NOT_STOPPED = "nothing was stopped"


class StateUnwritable(TaospecError):
    """A write to the state folder that must come before a launch or a stop failed, so
    nothing was launched or stopped (exit 3, as every failure of taospec's own)."""


@contextlib.contextmanager
def recorded_first(ledger: Ledger, nothing: str) -> Iterator[None]:
    """The writes to the state folder that come before anything is launched or stopped: one
    that fails raises :class:`StateUnwritable`, which says ``nothing`` ("nothing was
    launched") and where the state folder is, so the person knows what to mend."""
    try:
        yield
    except WriteFailed as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            mend = "free some space there"
        else:
            mend = "let this user write there"
        raise StateUnwritable(
            f"{exc}; {nothing}: taospec writes to the state folder {ledger.root} "
            f"(TAO_STATE_DIR) first; {mend}, or set TAO_STATE_DIR to a folder that takes writes"
        ) from None


def _check_room(ledger: Ledger, record: Record) -> None:
    """Refuse to launch unless the marks after the launch can be written."""
    try:
        size = os.stat(f"{ledger.jobs_dir}/{record.id}.json").st_size  # noqa: PTH116 - the ledger names its files by string
        space = os.statvfs(ledger.jobs_dir)
    except OSError as exc:
        raise WriteFailed(ledger.jobs_dir, exc) from None
    free = space.f_bavail * space.f_frsize
    needed = max(ROOM_MIN_BYTES, ROOM_RECORDS * 4 * size)
    if free >= needed and (space.f_files == 0 or space.f_favail >= ROOM_RECORDS):
        return
    reason = (
        f"only {free // 1024} KiB free in {ledger.jobs_dir} (at least {needed // 1024} KiB "
        f"needed to record the job's outcome); {NOT_LAUNCHED}"
    )
    with contextlib.suppress(TaospecError):
        ledger.mark(record.id, ERROR, message=reason, err_class=INFRA)
    raise NoRoom(f"{record.id}: {reason}")


class NoRoom(TaospecError):
    """The state folder cannot take the writes a launched job needs (exit 3)."""


def _mark_running(ledger: Ledger, record: Record, ref: str) -> Record:
    try:
        return ledger.mark(record.id, RUNNING, message="launched", backend_ref=ref)
    except WriteFailed as exc:
        raise LaunchedUnrecorded(
            f"{record.id} was launched ({ref}) but {exc}; `taospec status {record.id}` "
            "records it from the backend once the state folder can be written"
        ) from None


class LaunchedUnrecorded(TaospecError):
    """The job runs, but its RUNNING mark could not be written (exit 3)."""


_SIGNAL_CODES = {128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP}


def _killed_by_signal(code: int) -> bool:
    """A step's process that a signal (Ctrl-C, SIGTERM, SIGHUP to the group) ended."""
    return code < 0 or code in _SIGNAL_CODES


class _Stopped(Exception):
    """The run is being cancelled: no further step of this submit starts."""


class _Ended(Exception):
    """The record was closed from elsewhere (a cancel) while its steps ran."""


def _closed_meanwhile(ledger: Ledger, job_id: str) -> None:
    """Raise :class:`_Ended` when the record was closed (``taospec cancel`` from another
    shell) while the steps before the launch ran: the launch would start an untracked job."""
    record = ledger.get(job_id)
    if record.terminal_state is not None:
        last = record.transitions[-1].message if record.transitions else ""
        raise _Ended(f"recorded {record.terminal_state} while it was prepared ({last})")


def _stop_late_launch(ledger: Ledger, job_id: str, ref: str) -> str:
    """A cancel from elsewhere closed the record while the launch ran: stop what it started."""
    record = ledger.get(job_id)
    try:
        module = platforms.get(record.platform)
        note = module.cancel(record._replace(backend_ref=ref), ledger.sidecar(job_id))
    except EndedFirst:
        note = "what it launched had already ended"
    last = record.transitions[-1].message if record.transitions else ""
    return f"{job_id}: recorded {record.terminal_state} while it launched ({last}); {note}"


def _run_steps(
    plan: Plan,
    record: Record,
    ledger: Ledger,
    env: dict[str, str],
    progress: Progress,
    *,
    stopping: Callable[[], bool],
) -> str:
    """Run the plan's steps; the last one launches the job through its platform. A program
    of theirs not found here fails the job (:class:`CommandFailed`): its record is open."""
    *preparation, launch = plan.steps
    try:
        for step in preparation:
            if _not_needed(step):
                progress(f"{record.id}: {step.name}: not needed")
                continue
            if stopping():  # a check the signal ended may have said "needed"
                raise _Stopped
            progress(f"{record.id}: {step.name}")
            run_step(step, env, progress)
        if stopping():
            raise _Stopped
        _closed_meanwhile(ledger, record.id)
        progress(f"{record.id}: {launch.name}")
        launched = platforms.get(plan.platform).submit(launch, plan, _Runner(env, progress))
    except proc.NotFound as missing:
        raise missing.failed from None
    if launched.facts:
        ledger.update_sidecar(record.id, **launched.facts)
    return launched.ref


def _not_needed(step: Step) -> bool:
    """True when the step's ``unless`` command says it has nothing to do.

    A check that a signal ended (Ctrl-C, SIGTERM or SIGHUP to the process group) gave no
    answer: it fails as the interrupt it is, never as "needed".
    """
    if not step.unless:
        return False
    checked = proc.run(step.unless, extra_env=step.env, check=False)
    if _killed_by_signal(checked.returncode):
        raise CommandFailed(proc.shown(step.unless), checked.returncode, checked.output())
    return checked.ok


class _Runner:
    """Runs a platform's launch step with this submit's environment and progress."""

    def __init__(self, env: Mapping[str, str], progress: Progress) -> None:
        self.env = env
        self.progress = progress

    def run(self, step: Step) -> proc.Result:
        return run_step(step, self.env, self.progress)

    def run_unchecked(self, step: Step) -> proc.Result:
        return proc.run(step.argv, extra_env=step.env, stdin=step.stdin_text, check=False)

    def spawn(self, step: Step) -> int:
        assert step.log_path is not None, f"step {step.name} has no log file to start detached"
        return proc.spawn_detached(
            step.argv,
            env=proc.environment(step.env, step.pass_env, clean=step.clean_env, base=self.env),
            cwd=step.cwd or "/",
            log_path=step.log_path,
        )


def run_step(
    step: Step, env: Mapping[str, str], progress: Progress = lambda _: None
) -> proc.Result:
    """Run one non-detached step; with ``expect``, retry until its output has that line;
    with ``already_done``, a failure whose error output says so counts as done."""
    stdin = step.stdin_text if step.stdin_env is None else env[step.stdin_env]
    if step.stdin_env_file:
        stdin = env_file_text(step.stdin_env_file, env)
    if step.already_done is not None:
        done = proc.run(step.argv, extra_env=step.env, stdin=stdin, check=False)
        if not done.ok and step.already_done not in done.stderr:
            raise CommandFailed(proc.shown(step.argv), done.returncode, done.output())
        return done
    if step.expect is None:
        return proc.run(step.argv, extra_env=step.env, stdin=stdin)
    result = None
    for attempt in range(1, step.attempts + 1):
        result = proc.run(step.argv, extra_env=step.env, stdin=stdin, check=False)
        reasons = [
            line[len(FAILED) :] for line in result.stdout.splitlines() if line.startswith(FAILED)
        ]
        if reasons:
            raise StepFailed(step, reasons, result)
        if any(line.startswith(step.expect) for line in result.stdout.splitlines()):
            return result
        if attempt < step.attempts:
            progress(f"{step.name}: not yet ({attempt}/{step.attempts}), retrying")
            time.sleep(settings.seconds(settings.RETRY_INTERVAL))
    assert result is not None
    raise CommandFailed(
        proc.shown(step.argv),
        result.returncode,
        f"{result.output()}\n(no output line starting with {step.expect!r} after "
        f"{step.attempts} attempt{'s' if step.attempts > 1 else ''})",
    )


class StepFailed(CommandFailed):
    """A step whose output said why it failed (``TAOSPEC_FAILED=`` lines); not retried.

    The message is the step's own reasons, then its error output indented.
    """

    def __init__(self, step: Step, reasons: list[str], result: proc.Result) -> None:
        super().__init__(proc.shown(step.argv), result.returncode, result.output())
        message = f"{step.name}: " + "; ".join(lint.redacted(r) for r in reasons)
        errors = lint.redacted(result.stderr.strip())
        if errors:
            message += "\n" + "\n".join("    " + line for line in errors.splitlines())
        self.args = (message,)


def env_file_text(names: tuple[str, ...], env: Mapping[str, str]) -> str:
    """``NAME='value'`` lines for a job to source; the values go to the step's stdin only."""
    return "".join(f"{name}={shlex.quote(env[name])}\n" for name in names)


def teardown(record: Record, ledger: Ledger, progress: Progress = lambda _: None) -> None:
    """Run the stored plan's teardown steps once, after the job has ended."""
    side = ledger.sidecar(record.id)
    stored = side.get("plan")
    if side.get("teardown_done") or not isinstance(stored, dict):
        return
    steps = plan_from_json(stored).teardown
    for step in steps:
        progress(f"{record.id}: {step.name}")
        run_step(step, os.environ, progress)
    ledger.update_sidecar(record.id, teardown_done=True)


class SubmitFailed(JobFailed):
    """A step of the submit failed: ``record`` is the job's record, marked ERROR with the
    failure's class (an ``ERR_INFRA`` one may be submitted again as a retry)."""

    def __init__(self, message: str, record: Record) -> None:
        super().__init__(message)
        self.record = record


def _mark_failed(ledger: Ledger, record: Record, failure: CommandFailed) -> Record:
    if isinstance(failure, proc.NotStarted):  # taospec's own step here, not the job's command
        diagnosis = cannot_start(failure.program, failure.why)
    elif isinstance(failure, proc.FolderGone):
        diagnosis = folder_gone(failure.folder)
    else:
        diagnosis = classify(failure.returncode, "", failure.output, command=failure.command)
    message = f"{failure}\n{diagnosis}"
    marked = ledger.mark(record.id, ERROR, message=message, err_class=diagnosis.err_class)
    failure.args = (f"{failure}\n  => {diagnosis}",)
    return marked


def _interrupted(ledger: Ledger, record: Record) -> Record:
    """Interrupted during submit: remove whatever may have started, then record CANCELED
    (the record as it is then)."""
    interrupts.hold()
    return cancel_job(ledger.get(record.id), ledger, reason="interrupted during submit").record


class SubmitInterrupted(JobFailed):
    """The run was cancelled while a worker submitted ``record``: it is recorded CANCELED."""

    def __init__(self, record: Record) -> None:
        super().__init__(f"{record.id}: interrupted; recorded {record.state}")
        self.record = record


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What :func:`cancel_job` did: ``stopped`` is False when the job had already ended
    (its record then holds its real outcome) or another cancel got there first."""

    record: Record
    note: str
    stopped: bool
    leftover: str = ""
    """For a job recorded as ended: what of it still ran, and how it was stopped."""


def cancel_job(
    record: Record,
    ledger: Ledger,
    *,
    reason: str = "cancelled by the user",
    progress: Progress = lambda _: None,
) -> Cancelled:
    """Cancel one job, one cancel at a time per job (an flock in the state folder).

    The backend is asked first: a job that already ended is recorded with its real
    outcome and left as it is. Otherwise the intent is written to the sidecar
    before anything is stopped, so a cancel that cannot write stops nothing. A job
    recorded as ended whose backend says it still runs or waits (a record closed by
    hand, or before a launch it never saw) is stopped all the same; its record stays.
    """
    job_id = record.id
    lock = f"{ledger.root}/taospec/cancel/{job_id}.lock"
    with contextlib.ExitStack() as held:
        with recorded_first(ledger, NOT_STOPPED):
            held.enter_context(flocked(lock, 0o600, parents=True, remove=True))
        record = ledger.get(job_id)
        if record.terminal_state is not None:
            return Cancelled(record, "", False, _stop_leftover(record, ledger))
        module = platforms.get(record.platform)
        sidecar = ledger.sidecar(job_id)
        try:
            found = answered(module.status(record, sidecar), f"cannot cancel {job_id}")
            if found.terminal:
                raise EndedFirst(found)
            if found.gone and record.backend_ref is not None:
                # launched, and gone before anyone asked to stop it: it ended on its own
                raise EndedFirst(Status(ERROR, found.message, err_class=INFRA))
            with recorded_first(ledger, NOT_STOPPED):
                ledger.update_sidecar(job_id, **{CANCEL_NOTE: now(), CANCEL_FAILED: None})
            note = _stop(module, record, sidecar, ledger)
        except EndedFirst as ended:
            done = ended.status
            record = ledger.mark(
                job_id, done.state, message=done.message, source="poller", err_class=done.err_class
            )
            teardown(record, ledger, progress)
            return Cancelled(record, done.message, False)
        try:
            record = ledger.mark(job_id, CANCELED, message=f"{reason}; {note}")
        except TerminalStateError:  # a poll recorded its end while it was being stopped
            return Cancelled(ledger.get(job_id), note, False)
        teardown(record, ledger, progress)
        return Cancelled(record, note, True)


def _stop_leftover(record: Record, ledger: Ledger) -> str:
    """Stop what still runs of a job recorded as ended: what ran and what was done ('' when
    the backend says nothing of it runs or waits)."""
    module = platforms.get(record.platform)
    sidecar = ledger.sidecar(record.id)
    found = module.status(record, sidecar)
    if found.state not in (PENDING, RUNNING):
        return ""
    try:
        return f"but {found.message}; stopped: {module.cancel(record, sidecar)}"
    except EndedFirst:
        return ""


def _stop(module: Platform, record: Record, sidecar: dict[str, object], ledger: Ledger) -> str:
    """The platform's cancel. When it fails and the job is not seen to have stopped, the
    failure is noted beside the cancel's start, so the job's own end is recorded as its own."""
    try:
        return module.cancel(record, sidecar)
    except TaospecError as failure:
        try:
            found = module.status(record, sidecar)
            stopped = found.gone or (found.terminal and found.state != COMPLETE)
        except TaospecError:
            stopped = False  # the backend cannot say: the stop is not known to have landed
        if not stopped:
            reason = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
            ledger.update_sidecar(record.id, **{CANCEL_FAILED: f"{now()} ({reason})"})
        raise
