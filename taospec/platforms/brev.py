"""The brev platform: the docker platform's canonical launch, run on an NVIDIA Brev instance.

Brev is a compound of two platforms: ``brev exec INSTANCE CMD`` reaches the
instance, and the docker platform's own argument lists run there. Four
brev-cli facts shape every step (facts.md section 4):

- only the LAST positional of ``brev exec`` is the command, so the remote
  command is always ONE argument, composed by :mod:`taospec.remote`;
- stdin lines are read as more instance names, so stdin is /dev/null
  (:func:`taospec.proc.run` gives every child /dev/null unless told otherwise),
  and the remote command gets no input: the spec file's text is carried inside
  the prepare step's one argument (validate refuses a spec too long for it);
- the remote exit code is lost and a failed command is run a second time, so
  each remote script is idempotent and says its outcome in a marker line;
- piped stdout ends with the instance's name, which :func:`logs` drops.

Who the job runs as: ``user: host`` is refused. The submitting machine's
UID:GID says nothing about the instance's accounts, and the instance cannot be
asked while rendering (a plan is rendered without contacting anything, so
that what a reviewer reads is what runs). The spec names the UID:GID (or
``--user`` does), and the plan shows it.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from taospec import gpupick, identity, proc, remote, templates
from taospec.diagnose import NO_ENGINE, diagnose
from taospec.diagnostics import shown_file
from taospec.errors import CommandFailed, InvalidInput
from taospec.job import BrevOptions
from taospec.lint import redacted
from taospec.plan import Context, Plan, Step, gpu_ids_note, job_plan
from taospec.platforms import docker
from taospec.platforms.base import Launched, StepRunner, Write, last_lines
from taospec.platforms.common import (
    apart,
    gpu_facts,
    read_lines_through,
    still_writing,
    while_writing,
)
from taospec.states import UNKNOWN, Status

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record

NAME = "brev"
PROBE_ATTEMPTS = 120
"""600 s of probing at the default 5 s interval: a fresh instance's sshd can take that long."""
LAUNCH_ATTEMPTS = 3
"""Tries of a launch that printed no marker (a dropped connection): the guard makes a retry
safe, and without one a container might run with its record saying ERROR. Other steps fail
at once: nothing has started yet, and brev itself already ran a failed command twice."""
GONE = "could not look up instance"
RERUN = "Connection failed, checking instance status..."
"""brev's notice, on stderr, that it runs the command again (its ssh connection failed)."""
STARTING = "Instance {} is starting. \n"
"""brev's notice, on its stdout (a blank line follows), that it starts the stopped instance
before it runs the command."""
SAID_LINES = 3
"""The most lines a read of a container's output that failed ends its stderr with: docker's
error, and brev's on the command that failed (its exit status, where to look)."""
NOTHING = re.compile("(?!)")
"""A pattern no line matches: a read that does not follow ends in no such line."""


def exec_argv(instance: str, command: str) -> tuple[str, ...]:
    """``brev exec INSTANCE COMMAND`` with the remote command as one argument."""
    macros = templates.module(NAME, {"instance": instance, "remote": command})
    return templates.argv(macros.exec())


def delete_argv(instance: str) -> tuple[str, ...]:
    """``brev delete INSTANCE``."""
    return templates.argv(templates.module(NAME, {"instance": instance}).delete())


def ls_argv() -> tuple[str, ...]:
    """``brev ls --json``: the instances brev knows."""
    return templates.argv(templates.module(NAME, {}).ls())


# -- the plan ---------------------------------------------------------------


def options(context: Context) -> BrevOptions:
    """The ``brev:`` block, after refusing what cannot work on an instance."""
    job = context.job
    if job.brev is None:
        raise InvalidInput(
            f"{shown_file(job.file)}: platform brev needs a brev: block naming the instance",
            key=("platform",),
        )
    if job.docker.host:
        raise InvalidInput(
            f"{shown_file(job.file)}: docker.host does not apply to platform brev: the container "
            f"runs on instance {job.brev.instance}'s own Docker engine",
            key=("docker", "host"),
        )
    if context.user_from_host:
        raise InvalidInput(
            f"{shown_file(job.file)}: user: host would mean this machine's "
            f"{context.launcher.spec}, which says nothing about the accounts on instance "
            f'{job.brev.instance}. Set user: "UID:GID" to the instance account the job runs as '
            f"(brev exec {job.brev.instance} 'id -u; id -g' shows it), or pass --user UID:GID",
            key=("user",),
        )
    identity.refuse_root(context.identity, job.file, from_host=context.user_from_host)
    return job.brev


def plan(context: Context) -> Plan:
    """probe, env-check, paths-check, (login,) pull, prepare, launch; delete if ephemeral."""
    job = context.job
    brev = options(context)
    steps = [_probe(brev.instance), *_checks(context, brev.instance)]
    steps += _engine_steps(context, brev.instance)
    return job_plan(
        context,
        NAME,
        steps,
        notes=_notes(context, brev),
        backend=[
            ("instance", brev.instance),
            ("ephemeral", str(brev.ephemeral).lower()),
            ("env_source", "instance"),
            *gpu_facts(job),
        ],
        teardown=(_delete(brev.instance),) if brev.ephemeral else (),
    )


def gpu_query(instance: str) -> Step:
    """``nvidia-smi``'s occupancy query on the instance, for ``gpus: {free: N}`` at submit.

    It says ``TAOSPEC_GPUS=read`` after the CSV rows, or why it failed, because brev
    returns no exit code; until the instance answers, it is tried as often as the probe.
    """
    failure = (
        f"nvidia-smi failed on instance {instance}: check that its NVIDIA driver is "
        "installed (nvidia-smi -L there)"
    )
    text = remote.script(
        f"if {remote.command(gpupick.QUERY)}",
        f"then {remote.marker('GPUS', 'read')}",
        f"else {remote.fail(failure)}; fi",
    )
    why = f"read the GPUs' memory use on instance {instance} to pick the free ones"
    return _remote_step("gpu-query", instance, text, "GPUS", why, attempts=PROBE_ATTEMPTS)


def _delete(instance: str) -> Step:
    why = (
        f"delete the ephemeral instance {instance}: stops its billing and erases its disk "
        "(an instance already deleted counts as done)"
    )
    gone = f"instance with id/name {instance} not found"  # deleted already: nothing to stop
    return Step("delete", delete_argv(instance), why, already_done=gone)


def _remote_step(
    name: str, instance: str, text: str, marker: str, why: str, *, attempts: int = 1
) -> Step:
    """A step whose remote ``text`` counts as done when it prints ``TAOSPEC_<marker>=``."""
    expect = f"{remote.MARK}{marker}="
    return Step(name, exec_argv(instance, text), why, expect=expect, attempts=attempts)


def _probe(instance: str) -> Step:
    return Step(
        "probe",
        exec_argv(instance, "echo ok"),
        "wait until the instance answers a two-word command (a fresh one says RUNNING "
        f"before its sshd is up); up to {PROBE_ATTEMPTS} tries",
        expect="ok",
        attempts=PROBE_ATTEMPTS,
    )


def _checks(context: Context, instance: str) -> list[Step]:
    job = context.job
    where = f"instance {instance}"
    steps = []
    if job.env_pass:
        text = remote.require_env(job.env_pass, where)
        why = "check that every env.pass name is set on the instance; values never leave it"
        steps.append(_remote_step("env-check", instance, text, "CHECK", why))
    if job.mounts:
        paths = [(f"mounts[{i}].source", m.source) for i, m in enumerate(job.mounts)]
        text = remote.require_paths(paths, where)
        why = "check that every mount source exists on the instance"
        steps.append(_remote_step("paths-check", instance, text, "CHECK", why))
    return steps


def _engine_steps(context: Context, instance: str) -> list[Step]:
    argv = docker.commands(context)
    steps = [_login(argv, instance)] if docker.needs_login(context.job) else []
    pull = remote.guarded(
        remote.command(argv.present),
        remote.command(argv.pull),
        "PULL",
        present="present",
        done="pulled",
        failure="docker pull failed on the instance",
    )
    why = "pull the image before the GPU run, unless the instance has it"
    steps.append(_remote_step("pull", instance, pull, "PULL", why))
    why = (
        f"create the results tree owned by {context.identity.spec} and write the spec the job "
        f"reads as {context.config_path}"
    )
    steps.append(
        _remote_step(
            "prepare", instance, docker.remote_prepare(context, embed=True), "PREPARE", why
        )
    )
    launch = remote.guarded_launch(
        context.job_id,
        argv.run,
        not_started=docker.NOT_STARTED,
        undo_argv=docker.unstarted_rm_argv(context.job_id),
    )
    why = (
        "start the container detached, named and labelled after the job id, unless a "
        "container with that name exists (brev may run this twice); one docker created but "
        "could not start is removed"
    )
    steps.append(_remote_step("launch", instance, launch, "LAUNCH", why, attempts=LAUNCH_ATTEMPTS))
    return steps


def _login(argv: docker.Commands, instance: str) -> Step:
    """NGC login on the instance, with the instance's own NGC_KEY on stdin (never on argv)."""
    text = remote.guarded(
        remote.command(argv.present),
        f'printf %s "${docker.NGC_KEY}" | {remote.command(argv.login)}',
        "LOGIN",
        present="not-needed",
        done="done",
        failure="docker login nvcr.io failed on the instance: check the NGC_KEY set there",
    )
    why = "log in to NGC with the instance's own NGC_KEY on stdin, unless the image is there"
    return _remote_step("login", instance, text, "LOGIN", why)


def _notes(context: Context, brev: BrevOptions) -> tuple[str, ...]:
    job = context.job
    notes = [
        f"runs on Brev instance {brev.instance} through brev exec: each remote command is one "
        "argument, and each step reports its outcome in a TAOSPEC_ line because brev "
        "returns no exit code and runs a failed command again",
        "results_root and mount sources are paths on the instance",
        f"the job runs as {context.identity.spec}; the account brev exec uses on the instance "
        "must be that user or root to create the results tree",
    ]
    if job.gpus_free:
        notes.insert(0, gpu_ids_note(job.gpus_free))
    if job.env_pass:
        notes.append(
            f"{', '.join(job.env_pass)} are read from the instance's environment; their values "
            "never reach this machine"
        )
    if brev.ephemeral:
        notes.append(
            "ephemeral: the instance is deleted once the job ends or is cancelled; a tier-C job "
            "must upload its results in its own command before it exits"
        )
    return tuple(notes)


# -- the verbs -------------------------------------------------------------


def instance_of(record: Record, sidecar: Mapping[str, object]) -> str:
    """The job's instance: recorded at submit, else the first part of ``<instance>/<id>``."""
    recorded = sidecar.get("instance")
    if recorded:
        return str(recorded)
    if record.backend_ref and "/" in record.backend_ref:
        return record.backend_ref.split("/", 1)[0]
    raise InvalidInput(f"{record.id}: the record does not say which brev instance it ran on")


def submit(step: Step, plan: Plan, runner: StepRunner) -> Launched:
    """Run the launch step; the handle is :func:`backend_ref` of its answer."""
    return Launched(backend_ref(runner.run(step), plan.job_id))


def backend_ref(result: proc.Result, job_id: str) -> str:
    """``<instance>/<job id>``; the launch's argv is ``brev exec INSTANCE COMMAND``."""
    return f"{result.argv[-2]}/{job_id}"


def _exec(instance: str, command: str) -> proc.Result:
    return proc.run(exec_argv(instance, command), check=False)


def status(record: Record, sidecar: Mapping[str, object]) -> Status:
    """``docker inspect`` on the instance, mapped exactly as the docker platform maps it."""
    instance = instance_of(record, sidecar)
    result, states = _inspect(instance, record)
    if not states and GONE in result.stderr:
        return _looked_up(instance, result)
    if not states:
        message = f"brev exec on instance {instance} failed: {_last(result)}"
        return Status(UNKNOWN, message, unreachable=_no_answer(instance, result))
    if states[-1] == "missing":
        return _missing(record, instance, result)
    found = f"{instance}/{record.id}" if record.backend_ref is None else None
    return docker.interpret(states[-1], lambda: log_tail(record, sidecar), found)


def _inspect(instance: str, record: Record) -> tuple[proc.Result, list[str]]:
    """``docker inspect`` of the job's container on the instance: brev's answer, and the
    :data:`~taospec.platforms.docker.INSPECT_FORMAT` lines (``missing`` when there is no
    such container; none when the command did not run)."""
    fmt = f"{remote.MARK}STATE={docker.INSPECT_FORMAT}"
    inspect = remote.command(
        ["docker", "inspect", "--type", "container", "--format", fmt, record.id]
    )
    result = _exec(instance, f"{inspect} || {remote.marker('STATE', 'missing')}")
    return result, remote.values(result.stdout, "STATE")


def _looked_up(instance: str, failed: proc.Result) -> Status:
    """The job on an instance ``brev exec`` could not look up: gone, its container with it,
    when ``brev ls`` lists no instance of that name (it was deleted); else brev did not
    answer (``brev ls`` failed, or lists the instance all the same)."""
    listed = proc.run(ls_argv(), check=False)
    try:
        known = [(w["name"], w["id"]) for w in json.loads(listed.stdout)["workspaces"] or []]
    except (ValueError, KeyError, TypeError):
        message = f"brev ls failed: {_last(listed)}"
        unreachable = (
            f"brev does not answer: brev exec could not look up instance {instance} and brev "
            f"ls failed ({_last(listed)}): check that brev ls works from this machine"
        )
        return Status(UNKNOWN, message, unreachable=unreachable)
    if any(instance in named for named in known):
        message = f"brev exec on instance {instance} failed: {_last(failed)}"
        return Status(UNKNOWN, message, unreachable=_no_answer(instance, failed))
    message = (
        f"brev: instance {instance} was deleted (brev ls lists no instance of that name); the "
        "job's container went with it"
    )
    return Status(UNKNOWN, message, gone=True)


def _no_answer(instance: str, result: proc.Result) -> str:
    """Why brev exec could not run a command on the instance (brev's own words, without its
    retry notice and advice lines), and what to check."""
    said = [
        line
        for line in result.stderr.strip().splitlines()
        if line.strip() and not line.startswith(("Connection failed,", "Please check"))
    ]
    why = said[-1].strip() if said else _last(result)
    return (
        f"Brev instance {instance} does not answer through brev exec ({why}): check it with "
        f"brev ls (it may be stopped, starting or unreachable), and that "
        f"brev exec {instance} 'echo ok' works from this machine"
    )


def _last(result: proc.Result) -> str:
    lines = result.output().splitlines()
    return lines[-1] if lines else "no answer"


def _missing(record: Record, instance: str, result: proc.Result) -> Status:
    if "No such" in result.stderr or "no such" in result.stderr:
        message = f"docker: the container disappeared (no container named {record.id} on "
        return Status(UNKNOWN, f"{message}instance {instance})", gone=True)
    diagnosis = diagnose(result.stderr)
    reason = str(diagnosis) if diagnosis else _last(result)
    unreachable = ""
    if diagnosis is NO_ENGINE:
        said = next(line for line in result.stderr.splitlines() if diagnose(line) is NO_ENGINE)
        unreachable = (
            f"the Docker engine on Brev instance {instance} does not answer ({said}): start "
            "dockerd there"
        )
    message = f"docker inspect failed on instance {instance}: {reason}"
    return Status(UNKNOWN, message, unreachable=unreachable)


def log_tail(
    record: Record, sidecar: Mapping[str, object], lines: int = 50, writing: bool = False
) -> str:
    """The last ``lines`` whole lines of the container's output ('' when the instance cannot
    say), as :func:`taospec.platforms.docker.log_tail` takes them: of its last pieces only
    (:func:`~taospec.platforms.docker.last_whole_lines`), each stream read apart."""
    read = _reader(instance_of(record, sidecar), record)
    read_lines = docker.last_whole_lines(lines + 2 if writing else lines, read, writing)
    return docker.tail_text(read_lines, lines, writing)


class _Trailer:
    """Passes lines on, holding back a line that ends in ``pattern`` until another follows:
    what the remote side adds after the output, alone on its line or joined to the
    output's unended last line (brev's instance name, the follow's :func:`_followed`)."""

    def __init__(self, pattern: re.Pattern[str], on_line: Callable[[str], None]) -> None:
        self.pattern = pattern
        self.on_line = on_line
        self.held: str | None = None

    def line(self, text: str) -> None:
        if self.held is not None:
            self.on_line(self.held)
            self.held = None
        if self.pattern.search(text):
            self.held = text
        else:
            self.on_line(text)

    def end(self, ours: bool) -> re.Match[str] | None:
        """The held line's trailer when it is ``ours`` (what comes before it passed on);
        else the held line is the output's, passed on whole."""
        held, self.held = self.held, None
        found = self.pattern.search(held) if held is not None and ours else None
        rest = held[: found.start()] if held is not None and found else held
        if rest:
            self.on_line(rest)
        return found


class _Rerun:
    """Passes each stream's lines on once through brev's runs of one read. Each run begins
    with a line of its own (``begun``) on each stream; what comes before it is brev's (or
    ssh's): held back, and dropped when the run begins. When the ssh connection drops,
    brev says so (:data:`RERUN`), may start the instance (:data:`STARTING`, on stdout,
    joined to no line of the job's unless the drop cut one) and runs the command again,
    which prints the output from its start once more, so after either line as many lines
    of the stream as were shown are passed over. A line the drop cut in two ends in the
    one or the other: it goes with them, and comes again whole. ``on_rerun`` is told when
    a run begins on stderr, and says whether it dropped a line shown to it (of the run
    that ended: it is not shown again). The parts of a line not ended yet go to
    ``on_part`` while the stream's lines would go on (:meth:`part`), and ``on_again`` is
    told when a stream's run begins, since the parts it showed then come again."""

    def __init__(
        self,
        begun: str,
        instance: str,
        on_line: Callable[[str], None],
        on_error_line: Callable[[str], None],
        on_rerun: Callable[[], bool],
        *,
        on_part: Callable[[bool, str], None] | None = None,
        on_again: Callable[[bool], None] | None = None,
    ):
        self.begun = f"{begun}\n"
        self.starting = STARTING.format(instance)
        self.sinks = (on_line, on_error_line)
        self.on_rerun = on_rerun
        self.on_part = on_part
        self.on_again = on_again
        self.shown = [0, 0]
        self.skip = [0, 0]
        self.waiting = [True, True]  # for the run's begun line
        self.held: tuple[list[str], list[str]] = ([], [])  # brev's, if a run begins next

    def stream(self, index: int) -> Callable[[str], None]:
        held = self.held[index]

        def line(text: str) -> None:
            if text.endswith(self.begun) or (index == 1 and text.endswith(f"{RERUN}\n")):
                held.clear()
                if index == 1 and self.on_rerun():
                    self.shown[1] -= 1
                self.skip[index] = self.shown[index]
                self.waiting[index] = not text.endswith(self.begun)
                if self.on_again is not None:  # the line whose parts were shown comes again
                    self.on_again(bool(index))
            elif self.waiting[index] or self._starting(index, text):
                held.append(text)
            else:
                self._pass_held(index)
                self._pass(index, text)

        return line

    def part(self, error: bool, text: str) -> None:
        """A part of a line not ended yet (see :func:`taospec.proc.stream`), handed on
        while the stream's lines are: in a run that began, past those shown before, after
        what is held back."""
        index = int(error)
        if self.on_part is not None and not (
            self.waiting[index] or self.skip[index] or self.held[index]
        ):
            self.on_part(error, text)

    def _starting(self, index: int, text: str) -> bool:
        """Whether a line may be brev's notice that it starts the instance, or the blank
        line after it."""
        notice = text.endswith(self.starting)
        return index == 0 and (notice or (len(self.held[0]) == 1 and text == "\n"))

    def _pass(self, index: int, text: str) -> None:
        if self.skip[index]:
            self.skip[index] -= 1
        else:
            self.shown[index] += 1
            self.sinks[index](text)

    def _pass_held(self, index: int) -> None:
        for text in self.held[index]:
            self._pass(index, text)
        self.held[index].clear()

    def end(self, words: Write | None = None) -> None:
        """Pass on what is held back: no run began after it, so it is the output's, or
        brev's words on why it failed (where they went before), which go to ``words``
        when given (a read that failed)."""
        if words is None:
            self._pass_held(0)
            self._pass_held(1)
            return
        for held in self.held:
            for text in held:
                words(text)
            held.clear()


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
    """Stream ``docker logs`` from the instance, without brev's trailing instance line; a
    follow reads it once more when the container has exited, for what the follow left out
    (:class:`~taospec.platforms.docker.Followed`). A look (not ``follow``) reads the
    output's end alone (:func:`~taospec.platforms.docker.looked_at`) and shows a running
    container's output :func:`~taospec.platforms.common.while_writing`; one at all of it
    hands on each line as it comes (:func:`_read_all`), and what docker and brev said of a
    read that failed goes to stderr."""
    instance = instance_of(record, sidecar)
    if follow:
        running = tail is not None and not _ended(instance, record)
        earlier = docker.Earlier.looked(tail, _reader(instance, record), running)
        followed, shown = docker.Followed.after(earlier, on_line, on_part)
        code, who = _stream_logs(
            instance,
            record,
            followed.line(False),
            followed.line(True),
            follow=True,
            tail=earlier.window,
            on_rerun=followed.rerun,
            on_part=followed.part if shown else None,
            on_again=shown.again if shown else None,
        )
        followed.stopped(code, on_said, who)
        windowed = earlier.window is not None

        def the_rest(out: Write, err: Write) -> int:  # once the container has ended
            if code != 0 or not _ended(instance, record):
                return 1
            end = followed.pieces + docker.END_MARGIN if windowed else None
            return _stream_logs(instance, record, out, err, tail=end)[0]

        followed.end(the_rest, from_end=windowed, unlooked=earlier.unlooked())
        return code
    writing = still_writing(record, lambda: status(record, sidecar))
    if tail is None:
        return read_lines_through(
            lambda out, err: _read_all(instance, record, out, err), on_line, writing
        )
    found = docker.looked_at(tail, writing, _reader(instance, record))
    if found.code != 0:  # brev itself failed (the remote command cannot): its words
        for line in found.lines:
            _said(line)
        return found.code
    for line in apart(last_lines(while_writing(found.lines) if writing else found.lines, tail)):
        on_line(line)
    return found.code


def _read_all(instance: str, record: Record, out: Write, err: Write) -> int:
    """All of the container's output, each line of stdout to ``out`` and of stderr to
    ``err`` as it comes, but the last :data:`SAID_LINES` of stderr: docker's error and
    brev's words on a read that failed come there, after what the job wrote, so they go
    to ``err`` only once the read has succeeded (else to stderr, with what brev said before
    the read began)."""
    last: deque[str] = deque()

    def said(text: str) -> None:
        last.append(text)
        if len(last) > SAID_LINES:
            err(last.popleft())

    code = _stream_logs(instance, record, out, said, on_words=_said)[0]
    for text in last:
        (err if code == 0 else _said)(text)
    return code


def _said(line: str) -> None:
    """A line brev said of a read it could not make, on stderr."""
    print(redacted(line), end="", file=sys.stderr)


def _ended(instance: str, record: Record) -> bool:
    """Whether the container on the instance has exited (its output is all logged)."""
    states = _inspect(instance, record)[1]
    return bool(states) and states[-1].split()[0] in ("exited", "dead")


def _reader(instance: str, record: Record) -> docker.Read:
    def read(window: int | None, out: Write, err: Write) -> int:
        return _stream_logs(instance, record, out, err, tail=window)[0]

    return read


def _stream_logs(
    instance: str,
    record: Record,
    on_line: Callable[[str], None],
    on_error_line: Callable[[str], None],
    *,
    follow: bool = False,
    tail: int | None = None,
    on_rerun: Callable[[], bool] = lambda: False,
    on_part: Callable[[bool, str], None] | None = None,
    on_again: Callable[[bool], None] | None = None,
    on_words: Write | None = None,
) -> tuple[int, str]:
    """``docker logs`` (all of it, or its last ``tail`` pieces) on the instance: each line of
    its stdout, without brev's trailing instance line, to ``on_line``, of its stderr to
    ``on_error_line``; each line once, however often a dropped connection made brev run it
    (:class:`_Rerun`, which tells ``on_rerun``). Its exit code, and what exited with it: of
    a follow whose ``docker logs`` failed, docker's on the instance (:func:`_followed`);
    else brev's (1 when ``docker logs`` failed). Of a read that failed, what brev said
    before the read began goes to ``on_words`` when given."""
    token = secrets.token_hex(4)  # no line of the job's holds it
    begun = f"{remote.MARK}BEGUN={token}"
    say = remote.command(["echo", begun])
    read = _anchored(record.id, tail, token) if follow and tail is not None else None
    read = read or remote.command(docker.logs_argv(record.id, follow, tail))
    command = f"{say}; {say} >&2; {read}"
    once = _Rerun(
        begun, instance, on_line, on_error_line, on_rerun, on_part=on_part, on_again=on_again
    )
    lines = _Trailer(_trailer(instance), once.stream(0))  # brev's trailer is on its stdout
    said = _Trailer(_followed(token) if follow else NOTHING, once.stream(1))
    if follow:  # docker's code in a line: a failed command brev would run (and follow) again
        command += f" || echo {remote.MARK}FOLLOWED={token}=$? >&2"
        command += _unanchored(token) if tail is not None else ""
    code = proc.stream(
        exec_argv(instance, command),
        on_line=lines.line,
        on_error_line=said.line,
        on_part=once.part if on_part is not None else None,
    )
    lines.end(code == 0)
    failed = said.end(code == 0)
    once.end(on_words if code != 0 else None)
    if failed:
        return int(failed[1]), f"docker logs on instance {instance}"
    return code, NAME


def _anchored(container: str, window: int, token: str) -> str:
    """A follow of the container's output from the first piece of its last ``window``
    pieces, as docker logs it, however often brev runs the command: the first run keeps,
    on the instance, the time docker logged that piece at, and each run follows the output
    logged since then (a run again would otherwise begin with a later window, and the
    lines it passes over as shown would be lines not shown yet). The time is removed
    once the follow ends (:func:`_unanchored`)."""
    at = _anchor(token)
    first = remote.command(["docker", "logs", "--timestamps", "--tail", str(window), container])
    return (
        f"{{ [ -s {at} ] || {first} 2>&1 | head -n 1 | cut -d ' ' -f 1 > {at}; }}; "
        f"since=$(cat {at}); "
        f'{remote.command(["docker", "logs", "--follow"])} ${{since:+--since "$since"}} '
        f"{remote.command([container])}"
    )


def _anchor(token: str) -> str:
    """The instance's file (quoted) that keeps where a follow of the last lines begins."""
    return remote.command([f"/tmp/taospec-follow-{token}"])


def _unanchored(token: str) -> str:
    """What a follow's remote command ends with: its :func:`_anchor` removed."""
    return f"; rm -f {_anchor(token)}"


def _followed(token: str) -> re.Pattern[str]:
    """The stderr line a follow's remote command ends with when ``docker logs`` failed: its
    exit code, which brev does not pass back (the command itself exits 0, so that brev does
    not run it, and follow the output from its start, again). The read's own ``token``
    makes it a line no job can write; it ends the line a piece docker left unended began."""
    return re.compile(f"{remote.MARK}FOLLOWED={token}=([0-9]+)\n\\Z")


def _trailer(instance: str) -> re.Pattern[str]:
    """brev's last stdout line when stdout is piped: the instance's name."""
    return re.compile(f"{re.escape(instance)}\n?\\Z")


def cancel(record: Record, sidecar: Mapping[str, object]) -> str:
    """Remove the container on the instance; the plan's teardown then deletes an ephemeral one."""
    instance = instance_of(record, sidecar)
    result = _exec(instance, remote.remove_container(record.id))
    outcome = remote.values(result.stdout, "CANCEL")
    if "removed" in outcome:
        return f"container removed on instance {instance}"
    if "absent" in outcome:
        return f"no container was left on instance {instance}"
    if GONE in result.stderr:
        return f"instance {instance} is gone, and its container with it"
    raise CommandFailed(proc.shown(result.argv), result.returncode, result.output())
