"""The docker platform: tao-run-on-docker's canonical detached launch.

The container is named and labelled after the job id, runs as the job's
UID:GID with a writable HOME and cache redirects under ``/results``, gets its
GPUs by id, and stays after it exits so that status and logs can read it.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from taospec import identity, lint, proc, remote, templates
from taospec.diagnose import KILLED, KILLED_FROM_OUTSIDE, NO_ENGINE, classify, diagnose
from taospec.diagnostics import shown_file
from taospec.durable import write_atomic
from taospec.errors import CommandFailed, InvalidInput
from taospec.job import Job
from taospec.plan import LOG_FILE, Context, Plan, Step, gpu_ids_note, job_plan
from taospec.platforms.base import EndedFirst, Launched, StepRunner, Write, last_lines
from taospec.platforms.common import (
    Redrawn,
    apart,
    ended,
    gpu_facts,
    gpu_ids,
    local_steps,
    output_lines,
    read_lines_through,
    read_through,
    still_writing,
    tail_start,
    tree_macros,
    while_writing,
)
from taospec.states import COMPLETE, ERROR, PENDING, RUNNING, UNKNOWN, Status

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record

NAME = "docker"
NGC_REGISTRY = "nvcr.io"
NGC_KEY = "NGC_KEY"


def gpu_flag(job: Job) -> str:
    """``--gpus`` value: ``all`` or ``"device=0,1"`` with the literal quotes docker's CSV needs."""
    ids = gpu_ids(job)
    return ids if ids in ("", "all") else f'"device={ids}"'


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
        "owner": context.launcher.name,
        "image": job.image,
        "registry": registry(job.image),
        "gpus": gpu_flag(job),
        "ipc": job.docker.ipc,
        "shm_size": job.docker.shm_size,
        "user": context.identity,
        "results_dir": context.results_dir,
        "job_results": context.job_results,
        "mounts": context.mounts,
        "runtime_env": context.runtime_env(),
        "env_pass": job.env_pass,
        "env_set": context.env_set,
        "extra_args": job.docker.extra_args,
        "command": context.command,
    }


class Commands(NamedTuple):
    """The docker CLI argument lists of one job, for a local or a remote engine."""

    present: tuple[str, ...]
    login: tuple[str, ...]
    pull: tuple[str, ...]
    run: tuple[str, ...]


def commands(context: Context) -> Commands:
    """Image check, NGC login, pull and the canonical ``docker run``, as argument lists."""
    macros = templates.module("docker", values(context))
    return Commands(
        templates.argv(macros.image_present()),
        templates.argv(macros.login()),
        templates.argv(macros.pull()),
        templates.argv(macros.run()),
    )


def needs_login(job: Job) -> bool:
    """An nvcr.io image with NGC_KEY passed: log in with the key before pulling."""
    return registry(job.image) == NGC_REGISTRY and NGC_KEY in job.env_pass


def engine_steps(context: Context, env: tuple[tuple[str, str], ...] = ()) -> list[Step]:
    """login (nvcr.io with NGC_KEY named), pull-if-missing and the detached launch."""
    argv = commands(context)
    steps = []
    if needs_login(context.job):
        steps.append(
            Step(
                "login",
                argv.login,
                "log in to NGC with the key fed on stdin, unless the image is already here",
                env=env,
                unless=argv.present,
                stdin_env=NGC_KEY,
            )
        )
    steps.append(
        Step(
            "pull",
            argv.pull,
            "pull the image unless the engine has it",
            env=env,
            unless=argv.present,
        )
    )
    steps.append(
        Step(
            "launch",
            argv.run,
            "start the container detached, named and labelled after the job id",
            env=env,
        )
    )
    return steps


def remote_prepare(context: Context, *, embed: bool) -> str:
    """Remote shell text that creates the results tree, owned by the job's user, and the spec:
    read from the step's stdin, or ``embed``-ded in the text where the step has no input."""
    macros = tree_macros(context, context.identity)
    spec = context.spec_yaml
    spec_argv = templates.argv(macros.spec_file()) if spec is not None else None
    return remote.prepare(templates.argv(macros.prepare()), spec_argv, spec if embed else None)


def ssh_steps(context: Context, host: str) -> list[Step]:
    """Check and create the job's paths on the ssh host itself: they are that host's paths."""
    job = context.job
    ssh = remote.ssh_argv(host)
    paths = [("results_root", job.results_root)]
    paths += [(f"mounts[{i}].source", m.source) for i, m in enumerate(job.mounts)]
    return [
        Step(
            "paths-check",
            (*ssh, remote.require_paths(paths, host)),
            f"check on {host} that results_root and every mount source exist there",
            expect="TAOSPEC_CHECK=done",
        ),
        Step(
            "prepare",
            (*ssh, remote_prepare(context, embed=False)),
            f"create the results tree on {host}, owned by {context.identity.spec}, "
            f"and write the spec the job reads as {context.config_path} from this step's input",
            stdin_text=context.spec_yaml,
            expect="TAOSPEC_PREPARE=done",
        ),
    ]


class Engine(NamedTuple):
    """The engine a docker job runs on: a ``DOCKER_HOST``, a docker context, or (neither)
    the local engine; ``source`` says what named it (``docker.host``, ``$DOCKER_HOST``, ...)."""

    host: str | None = None
    context: str | None = None
    source: str = ""

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """What every docker command of the job is run with: a DOCKER_HOST, or the context
        with DOCKER_HOST emptied (which the docker CLI reads as unset; set, it would win)."""
        if self.host:
            return (("DOCKER_HOST", self.host),)
        if self.context:
            return (("DOCKER_HOST", ""), ("DOCKER_CONTEXT", self.context))
        return ()

    def __str__(self) -> str:
        where = self.host or (f"docker context {self.context}" if self.context else "")
        return f"{where or 'the local engine'} from {self.source}" if self.source else where

    def facts(self) -> list[tuple[str, str]]:
        """The plan's backend facts: the host or context, and (when the environment named
        it) the :data:`ENGINE` line."""
        facts = [("docker_host", self.host)] if self.host else []
        facts += [("docker_context", self.context)] if self.context else []
        return facts + ([(ENGINE, str(self))] if self.from_environment else [])

    @property
    def from_environment(self) -> bool:
        """Whether the environment (not the job file) named this engine."""
        return self.source not in ("", "docker.host")


ENGINE = "engine"
"""Backend fact (and sidecar note): which engine the job runs on and what named it. A record
without it, nor ``docker_host`` nor ``docker_context``, predates the pinned engine."""
LOCAL = Engine()


def engine(job: Job, environ: Mapping[str, str] = os.environ) -> Engine:
    """The engine the docker CLI would use for ``job`` in ``environ``, in its own order:
    ``docker.host``, then :func:`ambient`."""
    if job.docker.host:
        return Engine(host=job.docker.host, source="docker.host")
    return ambient(environ, job.file)


def ambient(environ: Mapping[str, str], file: str) -> Engine:
    """The engine ``environ`` points the docker CLI at: ``$DOCKER_HOST``, ``$DOCKER_CONTEXT``,
    the ``docker context use`` default of the docker configuration, or the local engine. A
    DOCKER_HOST that holds a credential is refused (for ``file``): the engine is written
    into the plan and the record."""
    host = environ.get("DOCKER_HOST", "")
    if host:
        if lint.lint_argv([host]):
            raise InvalidInput(
                f"{shown_file(file)}: $DOCKER_HOST ({lint.redacted(host)}) holds a credential, and "
                "taospec writes the engine a job runs on into its plan and record; name an "
                "engine without one (ssh keys, TLS certificates), or set docker.host"
            )
        return Engine(host=host, source="$DOCKER_HOST")
    context = environ.get("DOCKER_CONTEXT", "")
    if context:
        return LOCAL if context == "default" else Engine(context=context, source="$DOCKER_CONTEXT")
    config = Path(environ.get("DOCKER_CONFIG") or Path(environ.get("HOME", "/"), ".docker"))
    try:
        current = json.loads((config / "config.json").read_text()).get("currentContext")
    except (OSError, ValueError, AttributeError):
        current = None  # no configuration (or one docker itself refuses): the local engine
    if isinstance(current, str) and current not in ("", "default"):
        return Engine(context=current, source=f"docker context use ({config}/config.json)")
    return LOCAL


def plan(context: Context) -> Plan:
    """prepare, spec-file, (login,) pull, launch; on an ssh host, check and prepare there.
    Every docker command runs on :func:`engine`'s answer at render, whatever the environment
    of the launch (or of a later verb) names."""
    job = context.job
    identity.refuse_root(context.identity, job.file, from_host=context.user_from_host)
    where = engine(job)
    host = where.host
    on_ssh = bool(host) and str(host).startswith("ssh://")
    prepare = ssh_steps(context, str(host)) if on_ssh else local_steps(context)
    return job_plan(
        context,
        NAME,
        [*prepare, *engine_steps(context, where.env)],
        notes=_notes(context, where),
        backend=[*where.facts(), *gpu_facts(job)],
    )


def _notes(context: Context, where: Engine) -> tuple[str, ...]:
    notes = [gpu_ids_note(context.job.gpus_free)] if context.job.gpus_free else []
    if where.from_environment:
        notes.append(
            f"engine: {where}; every docker command of the job runs there, whatever the "
            "environment names at launch or when taospec is asked about the job later"
        )
    host = where.host
    if not host or host.startswith("unix://"):
        return tuple(notes)
    notes.append(
        f"the containers run on {host}: mount sources and results_root are paths on that "
        "host, not on this machine"
    )
    if context.user_from_host:
        notes.append(
            f"user: host is this machine's {context.identity.spec}; the job runs as that "
            f"UID:GID on {host} too"
        )
    if host.startswith("tcp://"):
        notes.append(f"taospec cannot reach {host}'s files: it creates the results tree here")
    return tuple(notes)


# -- the verbs -------------------------------------------------------------

INSPECT_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"
_NATIVE = {"created": PENDING, "restarting": PENDING, "running": RUNNING, "paused": RUNNING}


def engine_env(facts: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """What points the docker CLI at the engine a plan's (or a sidecar's) facts name: the
    job's own engine, whatever this process's environment names. A record from before the
    engine was pinned names none: the environment's engine, as then."""
    host, context = facts.get("docker_host"), facts.get("docker_context")
    if host or context:
        return Engine(host=str(host) if host else None, context=str(context or "")).env
    if facts.get(ENGINE):  # the local engine, however this environment points the CLI
        return (("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "default"))
    return ()


def on_this_machine(facts: Mapping[str, object]) -> bool:
    """Whether the engine the facts name runs here (its results folder is this machine's);
    a context's endpoint is not known here, so it counts as elsewhere."""
    host = str(facts.get("docker_host") or "")
    return not facts.get("docker_context") and (not host or host.startswith("unix://"))


def opened_facts(plan: Plan, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The sidecar notes a docker job's record opens with, beyond the plan's facts: for a
    plan on the local engine, that it is (:data:`ENGINE`). Such a plan's commands run as the
    environment points them, so one that points the CLI elsewhere now is refused."""
    if plan.platform != NAME or plan.backend_value("docker_host"):
        return {}
    if plan.backend_value("docker_context"):
        return {}
    now = ambient(environ, plan.file)
    if now != LOCAL:
        raise InvalidInput(
            f"{shown_file(plan.file)}: the plan of target {plan.target} runs on the local engine, "
            f"but the environment names {now} now; unset it, or render the job again (taospec run "
            "renders it where it runs)"
        )
    return {ENGINE: "the local engine"}


def submit(step: Step, plan: Plan, runner: StepRunner) -> Launched:
    """Run the launch step; the handle is :func:`backend_ref` of its answer.

    A ``docker run -d`` that exits :data:`NOT_STARTED` may have created the container and
    failed to start it (a command not in the image, a mount runc refuses); it is then
    removed (:func:`unstarted_rm_argv`).
    """
    try:
        return Launched(backend_ref(runner.run(step), plan.job_id))
    except CommandFailed as failure:
        if failure.returncode in NOT_STARTED:
            proc.run(unstarted_rm_argv(plan.job_id), extra_env=step.env, check=False)
        raise


NOT_STARTED = (125, 126, 127)
"""docker run's own exit codes: the engine's error, a command it cannot invoke, one it does
not find."""


def unstarted_rm_argv(job_id: str) -> tuple[str, ...]:
    """``docker rm`` of the container named after the job, once ``docker run`` exited
    :data:`NOT_STARTED`, so that no ``created`` container keeps the job's passed values in
    its configuration until a prune. Without ``--force``: it removes nothing that runs."""
    return ("docker", "rm", job_id)


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
    found = None
    if record.backend_ref is None:  # the launch's answer was lost: find it by its label
        ids = _labelled(record.id, env)
        found = ids[0] if len(ids) == 1 else None
    return interpret(inspected.stdout, lambda: log_tail(record, sidecar), found)


def interpret(inspected: str, tail: Callable[[], str], found: str | None = None) -> Status:
    """An :data:`INSPECT_FORMAT` line in the vocabulary; ``tail`` gives the log for a failure."""
    native, code_text, oom = inspected.split()
    code = int(code_text)
    if native in _NATIVE:
        stalled = native == "created"
        return Status(_NATIVE[native], f"docker: {native}", found_ref=found, stalled=stalled)
    if native == "exited" and code == 0:
        return Status(COMPLETE, "docker: exited 0", 0, found_ref=found)
    if native == "exited":
        return _failed(code, oom == "true", tail(), found)
    return Status(UNKNOWN, f"docker: {native} (exit code {code}); see docker ps -a", code)


def _failed(code: int, oom: bool, tail: str, found: str | None) -> Status:
    message = f"docker: exited with code {code}"
    if oom:
        message += " (killed by the kernel's out-of-memory killer)"
    diagnosis = classify(code, message, tail)
    if diagnosis is KILLED and not oom:
        diagnosis = KILLED_FROM_OUTSIDE  # the exit code's guess (memory), which docker denies
    return Status(ERROR, f"{message}; {diagnosis}", code, diagnosis.err_class, found)


def _missing(record: Record, env: tuple[tuple[str, str], ...], inspected: proc.Result) -> Status:
    text = inspected.stderr.strip()
    if "No such" not in text and "no such" not in text:
        diagnosis = diagnose(text)
        reason = str(diagnosis) if diagnosis else text.splitlines()[-1] if text else "no answer"
        unreachable = _no_engine(env, text) if diagnosis is NO_ENGINE else ""
        return Status(UNKNOWN, f"docker inspect failed: {reason}", unreachable=unreachable)
    listed = _list_labelled(record.id, env)
    if not listed.ok:
        return Status(UNKNOWN, f"docker ps -a failed: {listed.stderr.strip() or 'no answer'}")
    if listed.stdout.strip():
        return Status(UNKNOWN, "docker: the container is listed but cannot be inspected")
    return Status(
        UNKNOWN,
        f"docker: the container disappeared (no container named {record.id}; "
        "docker ps -a shows none)",
        gone=True,
    )


def _no_engine(env: tuple[tuple[str, str], ...], said: str) -> str:
    """Which Docker engine did not answer (what docker said), and what to check: the job's
    own engine, the one it was launched on (see :func:`engine_env`)."""
    pinned = dict(env)
    host, context = pinned.get("DOCKER_HOST"), pinned.get("DOCKER_CONTEXT")
    if host:
        where = f"at {host} (the engine the job was launched on)"
    elif context and context != "default":
        where = f"of docker context {context} (the engine the job was launched on)"
    elif not env and os.environ.get("DOCKER_HOST"):  # a record from before engines were pinned
        where = f"at {os.environ['DOCKER_HOST']} (DOCKER_HOST)"
    else:
        where = "on this machine"
    return (
        f"the Docker engine {where} does not answer ({said.splitlines()[-1]}): start dockerd "
        "there; the job's status, output and cancel are asked of that engine alone"
    )


def log_tail(
    record: Record, sidecar: Mapping[str, object], lines: int = 50, writing: bool = False
) -> str:
    """The last ``lines`` whole lines of the container's output ('' when there is none), of
    those its last pieces hold (see :func:`last_whole_lines`), each stream read apart and
    each line ended, so that one a stream left unended is not joined to one of the other.
    Of a container still ``writing``, as a look shows them (cut first)."""
    read = _reader(record.id, engine_env(sidecar))
    found = last_whole_lines(lines + 2 if writing else lines, read, writing)
    return tail_text(found, lines, writing)


Read = Callable[[int | None, Write, Write], int]
"""``docker logs --tail WINDOW`` (of all of the output when None), handing each line of its
stdout, and of its stderr, to the one and the other it is given; 0 when it read them."""


def _reader(container: str, env: tuple[tuple[str, str], ...]) -> Read:
    def read(window: int | None, out: Write, err: Write) -> int:
        argv = logs_argv(container, tail=window)
        return proc.stream(argv, extra_env=env, on_line=out, on_error_line=err)

    return read


def tail_text(read: list[str] | None, lines: int, writing: bool) -> str:
    """``log_tail``'s text of the last whole lines ``read`` (None: none could be read)."""
    if read is None:
        return ""
    return ended(last_lines(while_writing(read) if writing else read, lines))


TAIL_READS = 4
"""How many windows, each twice the one before, :func:`last_whole_lines` reads at most."""
LOOK_READS = 8
"""How many windows :func:`looked_at` reads at most before it reads all of the output."""


def last_whole_lines(lines: int, read: Read, writing: bool = False) -> list[str] | None:
    """The last ``lines`` whole lines of a container's output, of those its last pieces
    hold (:func:`read_tail`, at most :data:`TAIL_READS` windows), never all of it, so that a
    progress line every minute does not read a multi-day job's whole log. None when it
    failed. Of long lines, fewer than ``lines`` may be shown: a tail still, whole lines,
    read in bounded time."""
    if lines <= 0:
        return []
    found = read_tail(lines, read, TAIL_READS, writing)
    return None if found.code else last_lines(found.lines, lines)


class Tail(NamedTuple):
    """What :func:`read_tail` found: whole lines at the end of a container's output, as
    many as it was asked for or all of the output (``whole``), or fewer; or, of a read that
    failed (``code``, not 0), what that read gave."""

    lines: list[str]
    code: int = 0
    whole: bool = True
    window: int | None = None
    """The window of pieces that held them (None: all of the output)."""
    got: tuple[tuple[bool, str], ...] = ()
    """What that window gave: each line, with whether it is stderr's, in the order they came."""


def read_tail(lines: int, read: Read, reads: int, writing: bool = False) -> Tail:
    """At least ``lines`` whole lines at the end of a container's output, read with ``docker
    logs --tail WINDOW`` (``read``) alone, at most ``reads`` windows.

    docker's ``--tail`` counts each piece of a line it logged in pieces (of 16 KiB) as a
    line, so that what it gives of each stream may begin inside a line, and a value in it:
    only the lines after the first line of every stream are known whole (what follows a
    newline begins a line), and a tail is taken from those alone, so that no line inside it
    is left out (see :func:`_known_whole`). A window of ``2 * lines + 2`` pieces holds
    enough unless lines are long or one stream writes rarely (a traceback after much
    output); while it does not, one twice as large is read, and once one gives each stream
    exactly as the one before did, that one held all of the output, which begins with a
    whole line, and nothing is left out of it (a larger window gives more pieces; a job
    still writing would have to make each stream's last ones exactly as they were)."""
    window, before, whole = 2 * lines + 2, None, []
    for _ in range(reads):
        got, code = _last_pieces(window, read)
        if code != 0:
            return Tail([line for _, line in got], code, whole=False)
        if before is not None and _streams(got) == _streams(before):  # all of the output
            return Tail([line for _, line in got], got=tuple(got))
        whole = _known_whole(got, writing)
        if len(whole) >= lines:
            return Tail(last_lines(whole, lines), window=window, got=tuple(got))
        window, before = 2 * window, got
    return Tail(whole, whole=False)


def _last_pieces(window: int, read: Read) -> tuple[list[tuple[bool, str]], int]:
    """What ``read`` gives of the last ``window`` pieces: each line, with whether it is
    stderr's, in the order they came; and its exit code."""
    got: list[tuple[bool, str]] = []
    code = read(
        window, lambda line: got.append((False, line)), lambda line: got.append((True, line))
    )
    return got, code


def _known_whole(got: Sequence[tuple[bool, str]], writing: bool) -> list[str]:
    """The lines of ``got`` after the first line of each stream, which may begin inside a
    line. Of a container still ``writing``, a stream whose one line is one not ended yet
    does not hold the others back: a look cuts that line, and it is left out."""
    return [got[index][1] for index in _known_whole_at(got, writing)]


def _known_whole_at(got: Sequence[tuple[bool, str]], writing: bool) -> list[int]:
    """Where in ``got`` the lines :func:`_known_whole` keeps are."""
    firsts: dict[bool, int] = {}
    for index, (error, _) in enumerate(got):
        firsts.setdefault(error, index)
    unended = {
        index
        for error, index in firsts.items()
        if writing and index == max(i for i, (e, _) in enumerate(got) if e == error)
        and not got[index][1].endswith("\n")
    }  # fmt: skip
    start = max((index for index in firsts.values() if index not in unended), default=-1) + 1
    return [index for index in range(start, len(got)) if index not in unended]


def _streams(got: list[tuple[bool, str]]) -> tuple[str, str]:
    """The text of each stream (stdout, stderr) of ``got``."""
    return (
        "".join(line for error, line in got if not error),
        "".join(line for error, line in got if error),
    )


def logs(
    record: Record,
    sidecar: Mapping[str, object],
    *,
    tail: int | None,
    follow: bool,
    on_line: Callable[[str], None],
    on_said: Write | None = None,
    on_part: Write | None = None,
) -> int:
    """Stream ``docker logs``; returns its exit code. A pruned container's output is read
    from the copy ``prune`` left in the results directory, a block at a time. A look (not
    ``follow``) at the last ``tail`` lines reads the output's end alone (see
    :func:`looked_at`), one at all of it hands on each line as docker logs gives it, and
    either shows a running container's output
    :func:`~taospec.platforms.common.while_writing` (docker hands on a line not ended yet
    once it holds 16 KiB of it). What the docker CLI said of a follow it could not go on
    with goes to ``on_said``, not with the output (see :meth:`Followed.stopped`). A follow
    of the last ``tail`` lines reads the end of the output alone and follows from a window
    at its end (see :class:`Earlier`); once it has ended, what it left out is found in a
    window at the end (see :meth:`Followed.end`)."""
    kept = Path(record.results_dir, LOG_FILE)
    env = engine_env(sidecar)
    if on_this_machine(sidecar) and kept.is_file() and not _exists(record.id, env):
        with kept.open("rb") as log:
            if tail is None:
                read_through(log, on_line, writing=False)
                return 0
            log.seek(tail_start(log, tail, held=False))
            text = log.read().decode(errors="replace")
        for line in last_lines(output_lines(text), tail):
            on_line(line)
        return 0
    if follow:
        running = tail is not None and not _container_ended(record.id, env)
        earlier = Earlier.looked(tail, _reader(record.id, env), running)
        followed, shown = Followed.after(earlier, on_line, on_part)
        code = proc.stream(
            logs_argv(record.id, follow=True, tail=earlier.window),
            extra_env=env,
            on_line=followed.line(False),
            on_error_line=followed.line(True),
            on_part=followed.part if shown else None,
        )
        followed.stopped(code, on_said)
        windowed = earlier.window is not None

        def the_rest(out: Write, err: Write) -> int:  # once the container has ended
            if code != 0 or not _container_ended(record.id, env):
                return 1
            argv = logs_argv(record.id, tail=followed.pieces + END_MARGIN if windowed else None)
            return proc.stream(argv, extra_env=env, on_line=out, on_error_line=err)

        followed.end(the_rest, from_end=windowed, unlooked=earlier.unlooked())
        return code
    writing = still_writing(record, lambda: status(record, sidecar))
    if tail is None:  # all of it, each line as docker logs gives it
        read = _reader(record.id, env)
        return read_lines_through(lambda out, err: read(None, out, err), on_line, writing)
    found = looked_at(tail, writing, _reader(record.id, env))
    for line in apart(last_lines(while_writing(found.lines) if writing else found.lines, tail)):
        on_line(line)
    return found.code


def looked_at(tail: int, writing: bool, read: Read) -> Tail:
    """What a look at a container's output reads for its last ``tail`` lines to be taken,
    as ``docker logs`` (``read``) gives it, each stream's lines in one list; of a read that
    failed, what it said. The end of the output alone, read by :func:`read_tail` (with room
    for two more lines of a container still ``writing``, the unended lines of each stream
    that a look may cut to nothing); all of it once :data:`LOOK_READS` windows held too few
    whole lines (lines of many pieces), or, of a job still writing, never twice the same."""
    found = read_tail(tail + 2 if writing else tail, read, LOOK_READS, writing)
    if found.whole or found.code:
        return found
    got: list[str] = []
    return Tail(got, read(None, got.append, got.append))


class Earlier:
    """Which whole lines of each stream come before the last ``tail`` of them all, for
    ``logs -f --tail N`` to leave them out of what it follows (:meth:`after`). A line not
    ended yet is not among the last: it is shown once it has ended.

    :meth:`looked` reads the end of the output alone, and the follow then begins with a
    ``window`` of pieces that holds the tail (docker's ``--tail`` counts each piece of a
    line it logged in pieces of 16 KiB as a line, so that a window may begin inside a line)
    and begins inside what the look read, however the job logged up to :data:`SHIFT_ROOM`
    pieces between the two: each stream's lines the look read (``lines``), of which the
    first ``before`` are left out, its first always, since it may begin inside a line. The
    follow's first line of each stream is found among them, and the lines after it are
    left out while they are the look's next ones (see :meth:`after`). :meth:`of` counts
    the lines in all of the output (``lines`` None: the follow gives all of it too)."""

    def __init__(self, tail: int | None) -> None:
        self.tail = tail
        self.last: deque[bool] = deque()  # of the last ``tail`` lines, which are stderr's
        self.before = {False: 0, True: 0}
        self.lines: dict[bool, list[str]] | None = None
        self.window: int | None = None
        self.same = False  # the follow's window gives the look's lines, one for one

    @classmethod
    def of(cls, tail: int | None, look: Callable[[Write, Write], int]) -> Earlier:
        """Those of the output ``look`` reads (handing each line of stdout, and of stderr,
        to the one and the other it is given; 0 when it read it all); none when it did not."""
        earlier = cls(tail)
        if tail is None or look(earlier._count, earlier._count_error) == 0:
            return earlier
        return cls(None)

    @classmethod
    def looked(cls, tail: int | None, read: Read, writing: bool) -> Earlier:
        """Those of the end of the output of a container (still ``writing`` or not), as
        ``docker logs --tail`` (``read``) gives it: the window :func:`read_tail` finds the
        tail in (with room for the unended lines of each stream, at most
        :data:`LOOK_READS` windows), and :data:`SHIFT_ROOM` pieces more for the follow's
        window, and as many again for the look; of a container that has ended, the look's
        window itself, which the follow then gives line for line (nothing is logged between
        the two, and lines all the same are not taken for lines logged since); of all of the
        output when those windows held too few lines; none when a read failed."""
        if tail is None:
            return cls(None)
        found = read_tail(tail + 2, read, LOOK_READS, writing)
        if found.code != 0:
            return cls(None)
        if not found.whole:
            return cls.of(tail, lambda out, err: read(None, out, err))
        if found.window is None:  # all of the output
            return cls(tail)._within(list(found.got), None, writing)
        if not writing:  # the container has ended: the same window gives the same lines
            earlier = cls(tail)._within(list(found.got), found.window, writing)
            earlier.same = True
            return earlier
        window = found.window + 2 * SHIFT_ROOM
        got, code = _last_pieces(window, read)
        if code != 0:
            return cls(None)
        whole = sum(pieces(line) for _, line in got) < window  # fewer than it asked for
        follow = None if whole else found.window + SHIFT_ROOM
        return cls(tail)._within(got, follow, writing)

    def _within(self, got: list[tuple[bool, str]], window: int | None, writing: bool) -> Earlier:
        tail = self.tail or 0
        indices = _known_whole_at(got, writing) if window is not None else range(len(got))
        # of a container that has ended, a line not ended is one of the last too
        ended = [index for index in indices if not writing or got[index][1].endswith("\n")]
        start = ended[-tail] if 0 < tail <= len(ended) else len(got) if tail == 0 else 0
        firsts: dict[bool, int] = {}
        for index, (error, _) in enumerate(got):
            firsts.setdefault(error, index)
        self.window, self.lines = window, {False: [], True: []}
        for index, (error, line) in enumerate(got):
            self.lines[error].append(line)
            unsure = window is not None and index == firsts[error]  # may begin inside a line
            if unsure or (index < start and (line.endswith("\n") or not writing)):
                self.before[error] += 1
        return self

    def unlooked(self) -> list[bool]:
        """The streams (stderr's: True) of which the look read a window without a line."""
        return [error for error, lines in (self.lines or {}).items() if not lines]

    def all_after(self, error: bool) -> bool:
        """Whether :meth:`after` hands on every line of the stream the follow gives."""
        return self.before[error] == 0 and (self.lines is None or self.window is None)

    def _count(self, line: str, error: bool = False) -> None:
        if self.tail is not None and line.endswith("\n"):
            self.last.append(error)
            if len(self.last) > self.tail:
                self.before[self.last.popleft()] += 1

    def _count_error(self, line: str) -> None:
        self._count(line, error=True)

    def after(self, error: bool, on_line: Callable[[str], None]) -> Callable[[str], None]:
        """``on_line`` for the lines of stdout (of stderr when ``error``) after those
        counted before the last ``tail``.

        Of a window, the follow's first line of the stream is found among the look's, the
        last it may be (:func:`_begun_at`: one of them, what a window that begins at one of
        its pieces holds of it, or one that has ended since), so that of lines all the
        same no more are left out than those before the tail: it and the lines after it
        are left out while they are the look's, up to those before the last ``tail``, and
        so is what it holds of a line from one of its pieces on (it begins inside a line).
        A first line not among them was logged after the look and goes on when the look's
        last line of the stream had ended (it begins a line)."""
        left = self.before[error]
        looked = self.lines[error] if self.lines is not None else None
        # the follow gives all of the output, or the window the look read
        begins_with_it = looked is None or self.window is None or self.same
        at: int | None = 0 if begins_with_it else None  # the look's line that comes next

        def line(text: str) -> None:
            nonlocal at, left
            if at is None:  # the follow's first line of a window's stream
                seen = looked or []
                begun = ((i, _begun_at(seen[i], text)) for i in reversed(range(len(seen))))
                found = next(((i, start) for i, start in begun if start is not None), None)
                if found is None:  # logged after the look
                    at = len(seen)
                    if (seen and not seen[-1].endswith("\n")) or text.startswith("\ufffd"):
                        return  # it may go on a line, or begin inside a character
                else:
                    at = found[0] + 1
                    if found[0] < left or found[1]:
                        return  # one before the last, or what a later window holds of one
            elif at < left and (looked is None or text == looked[at]):
                at += 1
                return
            left = 0  # a line not as the look saw it: the window moved, the rest go on
            on_line(text)

        return line


LOG_PIECE = 16 * 1024
"""How much of a line docker's log copier holds before it logs that piece, unended."""
SHIFT_ROOM = 64
"""How many pieces the job may log between a look and the follow after it with no line of
the tail left out: the follow's window holds that many more than the tail needs, and the
look that many more again, so that the follow begins inside what the look read."""


def _begun_at(looked: str, text: str) -> int | None:
    """Where in ``looked``, a line a look gave, ``text`` (a follow's first line of a
    stream) begins: 0 when it is the same line (of one not ended then, ended since or not),
    the piece it begins at when it is the same from that piece on (a window that begins
    later); None when it is not that line."""
    data, begun = looked.encode(), text.encode()
    if looked.endswith("\n"):
        start = len(data) - len(begun)
        return start if start >= 0 and start % LOG_PIECE == 0 and data.endswith(begun) else None
    rest = memoryview(data)
    return next((at for at in range(0, len(data), LOG_PIECE) if begun.startswith(rest[at:])), None)


class Followed:
    """What ``docker logs --follow`` gave of each stream, handed on to ``out`` (stdout's
    lines) and ``err`` (stderr's) as each line ends (:meth:`line`), and, once the follow
    has ended, what it left out (:meth:`end`): it may stop once the container exits,
    before the log copier has flushed the last piece of a line the job never ended, so
    that piece, and with it the job's last line, would be lost.

    The docker CLI writes its own error, when the stream it reads breaks, where it writes
    the job's stderr: a stderr line of that form (:func:`dockers_own`) is held back until
    another line comes or the follow ends (:meth:`stopped`)."""

    def __init__(self, out: Write, err: Write, on_part: Callable[[bool, str], None] | None = None):
        self.sinks = {False: out, True: err}
        self.on_part = on_part
        self.seen = {False: 0, True: 0}  # the lines of each stream handed on
        self.recent: dict[bool, deque[str]] = {False: deque(), True: deque()}  # their last
        self.pieces = 0  # how many pieces docker logged of what the follow gave, at most
        self.held = {False: "", True: ""}  # the line of each stream the follow left unended
        self.maybe_dockers = ""  # a stderr line held back: the job's, or docker's own error

    def line(self, error: bool) -> Write:
        """What takes each line of stdout (of stderr when ``error``) the follow gives."""

        def take(text: str) -> None:
            self.pieces += pieces(text)
            if not text.endswith("\n"):
                self.held[error] = text
                return
            self._hand_on_held_back()
            if error and dockers_own(text):
                self.maybe_dockers = text
            else:
                self._hand_on(error, text)

        return take

    @classmethod
    def after(
        cls, earlier: Earlier, on_line: Write, on_part: Write | None
    ) -> tuple[Followed, Redrawn | None]:
        """A follow's lines of each stream after those ``earlier`` leaves out, to
        ``on_line``; given ``on_part``, with the parts of a line redrawn in place, and the
        :class:`~taospec.platforms.common.Redrawn` that shows them (None without)."""
        if on_part is None:
            return cls(earlier.after(False, on_line), earlier.after(True, on_line)), None
        shown = Redrawn(on_line, on_part, {e: earlier.all_after(e) for e in (False, True)})
        out, err = (earlier.after(error, shown.line(error)) for error in (False, True))
        return cls(out, err, on_part=shown.part), shown

    def part(self, error: bool, text: str) -> None:
        """A part of a line of stdout (of stderr when ``error``) not ended yet, handed to
        ``on_part`` (see :func:`taospec.proc.stream`): output came after the stderr line
        held back, which is then the job's."""
        if self.on_part is not None:
            self._hand_on_held_back()
            self.on_part(error, text)

    def _hand_on_held_back(self) -> None:
        if self.maybe_dockers:
            self._hand_on(True, self.maybe_dockers)
            self.maybe_dockers = ""

    def _hand_on(self, error: bool, text: str) -> None:
        self.seen[error] += 1
        self.recent[error].append(text)
        if len(self.recent[error]) > RECENT:
            self.recent[error].popleft()
        self.sinks[error](text)

    def rerun(self) -> bool:
        """The follow begins again, the run before it cut short (brev runs a command again
        when its connection drops): the stderr line held back is docker's own error, which
        that run ended with, since the job's would come again in the new run. Dropped;
        whether there was one."""
        dropped, self.maybe_dockers = bool(self.maybe_dockers), ""
        return dropped

    def stopped(self, code: int, on_said: Write | None, who: str = NAME) -> None:
        """Once the follow has ended with ``code``, the exit code of ``who``: the stderr line
        held back last is the job's when it exited 0 (handed on); else ``on_said`` is told
        who exited how, and docker's own error, when that line held it."""
        if code == 0:
            self._hand_on_held_back()
        elif on_said is not None:
            why = f": {self.maybe_dockers.strip()}" if self.maybe_dockers else ""
            on_said(f"{who} {proc.how_it_ended(code)}{why}")
        self.maybe_dockers = ""

    def end(
        self,
        read: Callable[[Write, Write], int],
        from_end: bool = False,
        unlooked: Collection[bool] = (),
    ) -> None:
        """Hand on what follows the lines handed on of each stream in what ``read`` gives
        (all of the output, once the container has ended; 0 when it read it), each line
        whole; when it read nothing (nonzero), what the follow left unended. The lines a
        stream leaves unended go on last, each but the last ended, so that one of a
        stream is not joined to one of the other. A follow that began with a window of the
        output (``from_end``) is found in the end ``read`` gives instead (see
        :meth:`_missed`; ``unlooked``: the streams of which the look before it read no line
        in its window)."""
        unended = self._missed(read, unlooked) if from_end else self._after_seen(read)
        last = [(error, text) for error, text in unended.items() if text]
        for i, (error, text) in enumerate(last):
            self.sinks[error](text if i == len(last) - 1 else f"{text}\n")

    def _after_seen(self, read: Callable[[Write, Write], int]) -> dict[bool, str]:
        left = dict(self.seen)
        unended = {False: "", True: ""}
        handed = False

        def rest(error: bool) -> Write:
            def take(text: str) -> None:
                nonlocal handed
                if left[error]:
                    left[error] -= 1
                elif text.endswith("\n"):
                    handed = True
                    self.sinks[error](text)
                else:
                    unended[error] = text

            return take

        if read(rest(False), rest(True)) != 0 and not handed:
            return self.held
        return unended

    def _missed(
        self, read: Callable[[Write, Write], int], unlooked: Collection[bool]
    ) -> dict[bool, str]:
        """Hand on the lines of each stream after the last ones the follow handed on, in
        the end of the output ``read`` gives (at least :attr:`pieces` and
        :data:`END_MARGIN` more), where they end (:func:`_after_run`); what each stream
        leaves unended. Where more than one place fits (lines the same as the ones before),
        or none, no line of that stream is handed on but the one it leaves unended: known
        to begin a line once a line of the stream ends before it."""
        kept: dict[bool, deque[tuple[int, str]]] = {
            error: deque(maxlen=RECENT + END_MARGIN + 1) for error in (False, True)
        }
        ended = {False: 0, True: 0}
        unended = {False: "", True: ""}

        def keep(error: bool) -> Write:
            def take(text: str) -> None:
                if text.endswith("\n"):
                    ended[error] += 1
                    kept[error].append((sum(ended.values()), text))
                else:
                    unended[error] = text

            return take

        if read(keep(False), keep(True)) != 0:
            return self.held
        missed: list[tuple[int, bool, str]] = []
        for error in (False, True):
            recent, got = list(self.recent[error]), [text for _, text in kept[error]]
            first = self.seen[error] == len(recent)  # it may begin inside a line
            after = _after_run(recent, first, got, ended[error])
            if not recent and error in unlooked and ended[error] <= END_MARGIN:
                after = ended[error]  # the look's window, which holds the end's, had none
            if after is None:
                unended[error] = unended[error] if ended[error] else self.held[error]
            elif after:
                missed += [(order, error, text) for order, text in list(kept[error])[-after:]]
        for _, error, text in sorted(missed):
            self.sinks[error](text)
        return unended


RECENT = 16
"""How many of the last lines of each stream a follow keeps, to be found in the end."""
END_MARGIN = 16
"""How many pieces more than a follow gave the end read after it holds: what it may have
left out (the last piece of a line the job never ended, of each stream) and room to spare."""


def pieces(text: str) -> int:
    """How many pieces docker's log copier logged a line in (one not ended yet: so far),
    of ``text`` as ``docker logs`` gave it (at most: a byte it could not decode counts as
    three)."""
    size = len(text.encode())
    return (size - 1) // LOG_PIECE + 1 if text.endswith("\n") else -(-size // LOG_PIECE)


def _after_run(recent: list[str], first: bool, got: list[str], ended: int) -> int | None:
    """How many of ``got``, the last of the ``ended`` lines of a stream that a read gave,
    come after ``recent``, the last lines a follow gave of it (``first``: the first of
    them is its first, which may begin inside a line, and so may the first of the read's):
    None unless exactly one place fits, ``END_MARGIN`` lines from the end at most."""
    fits = [
        after
        for after in range(min(END_MARGIN, ended - len(recent)) + 1)
        if _fits_at(recent, first, got, ended, len(got) - after - len(recent))
    ]
    return fits[0] if len(fits) == 1 else None


def _fits_at(recent: list[str], first: bool, got: list[str], ended: int, start: int) -> bool:
    if start < 0:
        return False
    for i, line in enumerate(recent):
        other = got[start + i]
        cut = (i == 0 and first) or (start + i == 0 and ended == len(got))
        if other != line and not (cut and (other.endswith(line) or line.endswith(other))):
            return False
    return True


STREAM_ERROR = "error from daemon in stream: "
"""How the docker CLI begins the error the engine puts in the stream it sends (``Error
grabbing logs: ...`` when it cannot read a container's log)."""
CONNECTION_ENDED = "unexpected EOF\n"
"""What the docker CLI says when the engine's connection ends in the middle of a stream."""


def dockers_own(line: str) -> bool:
    """Whether a line has the form of the docker CLI's own error when the stream of a
    container's output it reads breaks (the CLI writes it, alone on a line, last)."""
    return line.startswith(STREAM_ERROR) or line == CONNECTION_ENDED


def _container_ended(name: str, env: tuple[tuple[str, str], ...]) -> bool:
    """Whether the container has exited (its output, all of it, is logged by then)."""
    inspected = proc.run(
        ["docker", "inspect", "--type", "container", "--format", "{{.State.Status}}", name],
        extra_env=env,
        check=False,
    )
    return inspected.ok and inspected.stdout.strip() in ("exited", "dead")


def logs_argv(container: str, follow: bool = False, tail: int | None = None) -> list[str]:
    """``docker logs`` of ``container``: all of its output (its last ``tail`` pieces: see
    :func:`read_tail`), followed while it runs. docker's ``--tail`` counts each piece of a
    line logged in pieces as a line: see :func:`read_tail` and :class:`Earlier`."""
    return [
        "docker",
        "logs",
        *(["--tail", str(tail)] if tail is not None else []),
        *(["--follow"] if follow else []),
        container,
    ]


def _exists(name: str, env: tuple[tuple[str, str], ...]) -> bool:
    found = proc.run(["docker", "inspect", "--type", "container", name], extra_env=env, check=False)
    return found.ok


def prune(record: Record, sidecar: Mapping[str, object], *, dry_run: bool) -> str | None:
    """Copy a finished job's output to ``<results_dir>/taospec.log``, then remove its
    container (and with it the passed variables' values in its configuration).

    None when there is nothing to prune; otherwise what was (or would be) done. A
    container that has not exited, or whose results directory is not on this
    machine, is left as it is.
    """
    env = engine_env(sidecar)
    inspected = proc.run(
        ["docker", "inspect", "--type", "container", "--format", "{{.State.Status}}", record.id],
        extra_env=env,
        check=False,
    )
    if not inspected.ok:
        return None
    native = inspected.stdout.strip()
    if native not in ("exited", "dead", "created"):
        return f"kept: the container is {native}"
    results = Path(record.results_dir)
    if not on_this_machine(sidecar):
        return f"kept: the results directory {record.results_dir} is not on this machine"
    if not results.is_dir():
        return (
            f"kept: its results directory {record.results_dir} is gone, so its output has "
            f"nowhere to be kept; make that folder again (logs then reads the copy), or "
            f"remove the container with its output: docker rm {record.id}"
        )
    if dry_run:
        return f"would copy its output to {results / LOG_FILE} and remove the container"
    kept = _keep_output(record, sidecar)
    if isinstance(kept, str):
        return f"kept: docker logs failed: {kept}"
    _remove([record.id], env)
    return f"output copied to {kept}; container removed"


def _keep_output(record: Record, sidecar: Mapping[str, object]) -> Path | str | None:
    """Copy the container's output to ``<results_dir>/taospec.log`` (owned like the folder),
    where ``logs`` reads it once the container is gone, its lines in the order ``logs`` shows
    them: the copy's path; what ``docker logs`` said when it failed; None when the results
    directory is not on this machine."""
    results = Path(record.results_dir)
    if not on_this_machine(sidecar) or not results.is_dir():
        return None
    read = _reader(record.id, engine_env(sidecar))
    lines: list[str] = []  # as logs shows them: a line of one stream never breaks the other's
    code = read_lines_through(lambda out, err: read(None, out, err), lines.append, False)
    if code != 0:
        return f"docker logs {proc.how_it_ended(code)}: {''.join(lines[-3:]).strip()}"
    target = results / LOG_FILE
    write_atomic(target, "".join(lines).encode(), mode=0o644)
    owner = results.stat()
    os.chown(target, owner.st_uid, owner.st_gid)
    return target


def cancel(record: Record, sidecar: Mapping[str, object]) -> str:
    """Kill the container, then remove it (and any container labelled with the job id).

    A container that had already exited is left as it is and :class:`EndedFirst`
    carries its real outcome; one in ``created`` (a launch cut short) is removed.
    """
    env = engine_env(sidecar)
    killed = proc.run(["docker", "kill", record.id], extra_env=env, check=False)
    if not killed.ok and "is not running" in killed.stderr:
        inspected = proc.run(
            ["docker", "inspect", "--type", "container", "--format", INSPECT_FORMAT, record.id],
            extra_env=env,
            check=False,
        )
        if inspected.ok:
            ended = interpret(inspected.stdout, lambda: log_tail(record, sidecar))
            if ended.terminal:
                raise EndedFirst(ended)
    kept = _keep_output(record, sidecar) if killed.ok else None
    removed = _remove([record.id], env)
    # A docker CLI killed while it created the container may leave the daemon to
    # finish creating it a moment later: look for the job's label until it settles.
    settle = 1.0 if record.backend_ref is None else 0.0
    deadline = time.monotonic() + settle
    while True:
        labelled = _labelled(record.id, env)
        if labelled:
            removed = _remove(labelled, env) or removed
        elif time.monotonic() >= deadline:
            break
        else:
            time.sleep(0.2)
    if not removed:
        return "no container was left"
    if isinstance(kept, Path):
        return f"output copied to {kept}; container removed"
    return "container removed"


def _list_labelled(job_id: str, env: tuple[tuple[str, str], ...]) -> proc.Result:
    """``docker ps -a`` of the containers labelled with ``job_id``: their full ids."""
    argv = ["docker", "ps", "-a", "--no-trunc", "--filter", f"label=tao-job={job_id}"]
    return proc.run([*argv, "--format", "{{.ID}}"], extra_env=env, check=False)


def _labelled(job_id: str, env: tuple[tuple[str, str], ...]) -> list[str]:
    listed = _list_labelled(job_id, env)
    return listed.stdout.split() if listed.ok else []


def _remove(names: list[str], env: tuple[tuple[str, str], ...]) -> bool:
    """``docker rm --force``; True when a container was removed (by us or a concurrent cancel)."""
    result = proc.run(["docker", "rm", "--force", *names], extra_env=env, check=False)
    if "already in progress" in result.stderr:
        return True
    if result.ok or "No such container" in result.stderr:
        # docker prints each name it removed (some engines exit 0 for a missing one)
        return bool(result.stdout.split())
    raise CommandFailed(proc.shown(result.argv), result.returncode, result.output())
