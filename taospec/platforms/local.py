"""The local platform: the job's command as a plain process on this machine.

The process runs in its own session (so cancel ends its whole group), in its
results directory, with an environment built from the spec alone: the same
HOME and cache redirects a container gets, ``env.set``, and the names in
``env.pass`` (plus PATH) copied from the launcher.

What only rendering and cancelling use is imported there, so ``status`` on a
finished job reads /proc and the exit file without loading plans or processes.
"""

from __future__ import annotations

import codecs
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from taospec import proc, templates
from taospec.diagnose import classify
from taospec.diagnostics import shown_file
from taospec.errors import InvalidInput
from taospec.plan import LOG_FILE, Context, Plan, Step, gpu_ids_note, job_plan
from taospec.platforms.base import EndedFirst, Launched, StepRunner, Write, last_lines
from taospec.platforms.common import (
    LOG_TAIL_BYTES,
    TAIL_BLOCK,
    Unended,
    gpu_facts,
    gpu_ids,
    local_steps,
    output_lines,
    owner,
    read_through,
    read_until_ended,
    still_writing,
    tail_start,
    while_writing,
)
from taospec.states import COMPLETE, ERROR, RUNNING, UNKNOWN, Status

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record

NAME = "local"
EXIT_FILE = "taospec.exit"
JOB_ID_VARIABLE = "TAO_JOB_ID"
WRAPPER = (
    'exit_file=$1; shift; "$@"; code=$?; echo "$code" > "$exit_file.tmp" && '
    'command -p mv -f "$exit_file.tmp" "$exit_file"; exit "$code"'
)
"""Runs the command, then records its exit code where ``status`` reads it.

The wrapper runs with the job's environment, whose PATH (``env.set`` may give its own)
need not name the system's folders: it is started as ``/bin/sh``, and finds its own
``mv`` (and ``setpriv``, in the template) with ``command -p``, which searches the
system's standard PATH and leaves the job's as it is."""


def plan(context: Context) -> Plan:
    """prepare, spec-file, launch."""

    job = context.job
    switch = owner(context) is not None
    if switch and context.launcher.uid != 0:
        raise InvalidInput(
            f"{shown_file(job.file)}: user {context.identity.spec} differs from the launching user "
            f"{context.launcher.spec}; only root can start a process as another user",
            key=("user",),
        )
    macros = templates.module(
        "local",
        {
            "wrapper": WRAPPER,
            "exit_file": f"{context.results_dir}/{EXIT_FILE}",
            "switch_user": switch,
            "user": context.identity,
            "command": context.command,
        },
    )
    env = [(JOB_ID_VARIABLE, context.job_id), *context.runtime_env()]
    gpus = gpu_ids(job)
    if gpus:
        env.append(("CUDA_VISIBLE_DEVICES", gpus))
    env += context.env_set
    launch = Step(
        "launch",
        templates.argv(macros.run()),
        "start the command in its own session; output goes to the log file",
        env=tuple(env),
        # the launcher's PATH, unless env.set gives the job its own
        pass_env=(*(() if "PATH" in dict(job.env_set) else ("PATH",)), *job.env_pass),
        clean_env=True,
        cwd=context.results_dir,
        log_path=f"{context.results_dir}/{LOG_FILE}",
    )
    return job_plan(
        context,
        NAME,
        [*local_steps(context), launch],
        notes=[gpu_ids_note(job.gpus_free)] if job.gpus_free else [],
        backend=gpu_facts(job),
    )


# -- the verbs -------------------------------------------------------------


def submit(step: Step, plan: Plan, runner: StepRunner) -> Launched:
    """Start the job's process group detached; the handle is ``pid:<pid>``, as TAO records it.

    The process's start time is kept, so a later pid reuse is never taken for the job.
    """
    pid = runner.spawn(step)
    return Launched(f"pid:{pid}", {"start_time": proc.start_time(pid)})


def _pid(record: Record) -> int | None:
    ref = record.backend_ref or ""
    return int(ref[4:]) if ref.startswith("pid:") and ref[4:].isdigit() else None


def find_by_job_id(job_id: str) -> int | None:
    """The session leader whose environment names ``job_id`` (heals a lost RUNNING mark)."""
    wanted = f"{JOB_ID_VARIABLE}={job_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ and os.getsid(int(entry.name)) == int(entry.name):
            return int(entry.name)
    return None


def status(record: Record, sidecar: Mapping[str, object]) -> Status:
    """RUNNING while the job's leader runs (the same process, by start time); then the exit
    code the leader wrote when its command ended. A leader killed before that writes none:
    the job runs while a process of its group does, as :func:`cancel` sees it."""
    pid = _pid(record)
    found = None
    if pid is None:
        pid = find_by_job_id(record.id)
        found = f"pid:{pid}" if pid is not None else None
    started = sidecar.get("start_time") if found is None else None
    if pid is not None and proc.alive(pid, started):
        return Status(RUNNING, f"process {pid} is running", found_ref=found)
    code = _exit_code(record)
    if code is None and pid is not None and proc.group_alive(pid, started):
        return Status(
            RUNNING,
            f"process group {pid} is running (its leader is gone: no exit code will be known)",
            found_ref=found,
        )
    if code is None:
        return Status(
            UNKNOWN,
            "the process disappeared (it is gone and left no exit code)",
            found_ref=found,
            gone=True,
        )
    if code == 0:
        return Status(COMPLETE, "process exited 0", 0, found_ref=found)

    message = f"process exited with code {code}"
    diagnosis = classify(code, message, log_tail(record, sidecar))
    return Status(ERROR, f"{message}; {diagnosis}", code, diagnosis.err_class, found)


def _exit_code(record: Record) -> int | None:
    try:
        text = Path(record.results_dir, EXIT_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def log_tail(
    record: Record, sidecar: Mapping[str, object], lines: int = 50, writing: bool = False
) -> str:
    """The last ``lines`` of the job's log file, of those its last 64 KiB hold whole (see
    :func:`~taospec.platforms.common.tail_start`). Of a job still ``writing``, as a look
    shows them."""
    try:
        with Path(record.results_dir, LOG_FILE).open("rb") as log:
            log.seek(tail_start(log, lines, held=writing, within=LOG_TAIL_BYTES))
            whole = output_lines(log.read().decode(errors="replace"))
    except OSError:
        return ""
    return "".join(last_lines(while_writing(whole) if writing else whole, lines))


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
    """Print the log file (its last ``tail`` lines), then follow it while the job runs;
    to ``on_part``, when given, a line being redrawn in place as it is
    (:func:`~taospec.platforms.common.redrawn_at`)."""

    path = Path(record.results_dir, LOG_FILE)
    if not path.exists():
        if not _launched(record):
            on_line(f"(no log yet at {path})\n")
            return 0
        raise InvalidInput(
            f"cannot read the output of {record.id}: {_gone(path)} (removed or replaced since "
            f"the job ran); the job's record is unchanged ({record.state})"
        )
    writing = not follow and still_writing(record, lambda: status(record, sidecar))
    with path.open("rb") as log:
        if tail is not None:  # a last line not ended is one of them, unless it may go on
            held = writing or (follow and still_writing(record, lambda: status(record, sidecar)))
            log.seek(tail_start(log, tail, held=held))
        if follow:
            unended = Unended(on_line, on_part)
            if tail is not None:  # the last lines, from where tail_start found them
                unended.take(log.read(), tail)
            read_until_ended(
                lambda: status(record, sidecar).state != RUNNING,
                lambda: log.read1(TAIL_BLOCK),  # a block at a time, however far behind
                unended.take,
                0.2,
            )
            unended.end()
            return 0
        if tail is None:
            read_through(log, on_line, writing=writing)
            return 0
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        lines = output_lines(decoder.decode(log.read()))
        for line in last_lines(while_writing(lines) if writing else lines, tail):
            on_line(line)
        if not writing and (rest := decoder.decode(b"", final=True)):
            on_line(rest)
    return 0


def _launched(record: Record) -> bool:
    """Whether the job's process was started, so that its log was opened."""
    return record.backend_ref is not None or any(t.state == RUNNING for t in record.transitions)


def _gone(log: Path) -> str:
    """What of the path to a launched job's ``log`` is no longer there."""
    for folder in log.parents:
        if folder.is_dir():
            return (
                f"{log} is gone"
                if folder == log.parent
                else f"its results directory {log.parent} is gone"
            )
        if folder.exists():
            return f"{folder} is a file now, not a directory"
    return f"its results directory {log.parent} is gone"


def cancel(record: Record, sidecar: Mapping[str, object]) -> str:
    """End the job's whole process group: TERM, then KILL after a grace period."""

    pid = _pid(record) or find_by_job_id(record.id)
    started = sidecar.get("start_time")
    if pid is None or not proc.group_alive(pid, started):
        ended = status(record, sidecar)
        if ended.terminal:
            raise EndedFirst(ended)
        return "no process was left"
    proc.signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + proc.GRACE_SECONDS
    while time.monotonic() < deadline:
        if not proc.group_alive(pid, started):  # every process of the job, not its leader only
            return f"process group {pid} ended"
        time.sleep(0.05)
    proc.signal_group(pid, signal.SIGKILL)
    return f"process group {pid} killed"
