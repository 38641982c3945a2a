"""The one place taospec starts other programs.

(The only other processes taospec makes are copies of itself: the workers
:mod:`taospec.workers` forks to validate many files at once.) Every command
is an argument list. What runs is logged (redacted) when
``TAOSPEC_VERBOSE`` is set or ``-v`` is given; a failure carries the command,
its exit code and its output. Ctrl-C is handled in order: give the child a
moment to stop on its own, then terminate it, then kill it.

Every wait with a timeout follows one rule (:func:`_wait`): it ends when the command
exits, or at the timeout, when the command (its whole process group when it leads one
of its own) is terminated, then killed; either way its output is read for
:data:`PIPE_GRACE` seconds more at most, since what it started (a docker CLI helper, an
ssh ControlMaster, work a script puts in the background) may hold its pipes open.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from taospec.errors import CommandFailed, InvalidInput
from taospec.lint import redacted

GRACE_SECONDS = 5.0
PIPE_GRACE = 1.0
"""Seconds a timed wait reads output for once the command has ended."""
POLL_SECONDS = 0.25
"""Seconds between looks at whether a command waited for with a timeout has ended."""
VERBOSE = os.environ.get("TAOSPEC_VERBOSE", "") not in ("", "0")


def shown(argv: Sequence[str]) -> str:
    """An argument list as one redacted shell line."""
    return redacted(shlex.join(argv))


def _log(argv: Sequence[str], env: Mapping[str, str] | None) -> None:
    if VERBOSE:
        prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
        print(f"+ {redacted(prefix)}{shown(argv)}", file=sys.stderr, flush=True)


class Result(NamedTuple):
    """A finished command."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    """It was stopped at its timeout (its stderr ends saying so)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def output(self) -> str:
        """stdout then stderr, redacted, for messages."""
        return redacted((self.stdout + self.stderr).strip())


def how_it_ended(returncode: int) -> str:
    """``exited CODE``, or, of a process a signal ended (a negative return code),
    ``was ended by SIGNAME``: a process may die of the signal or catch it and exit."""
    if returncode >= 0:
        return f"exited {returncode}"
    try:
        return f"was ended by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was ended by signal {-returncode}"


def environment(
    extra: Iterable[tuple[str, str]] = (),
    passed: Iterable[str] = (),
    *,
    clean: bool = False,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A child's environment: the launcher's (or nothing, when ``clean``) plus ``extra``."""
    source = os.environ if base is None else base
    env = {} if clean else dict(source)
    env.update(extra)
    for name in passed:
        if name in source:
            env[name] = source[name]
    return env


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    extra_env: Iterable[tuple[str, str]] = (),
    stdin: str | bytes | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> Result:
    """Run ``argv`` to completion and capture its output.

    ``extra_env`` is logged; ``env`` (a whole environment) is not. With
    ``check`` a non-zero exit raises :class:`CommandFailed`.
    """
    data = stdin.encode() if isinstance(stdin, str) else stdin
    process = _popen(argv, env, extra_env, with_stdin=data is not None)
    return _finished(argv, process, data, timeout, check=check)


def read_bytes(argv: Sequence[str]) -> tuple[int, bytes, str]:
    """Run ``argv`` (a read of a file, on another machine) to completion, with no input:
    its exit code, what it printed as the very bytes (a decode changes a byte that is not
    UTF-8, and a read cut through a character), and its stderr."""
    process = _popen(argv, None, (), with_stdin=False)
    out, err, _ = _communicate(process, None, None)
    return process.returncode, out, err.decode(errors="replace")


def run_bounded(
    argv: Sequence[str], *, extra_env: Iterable[tuple[str, str]] = (), timeout: float
) -> Result:
    """Run ``argv`` in a session of its own with no input, waiting for it at most ``timeout``
    seconds, and return what it printed (the last :data:`KEPT_OUTPUT` bytes of each stream),
    whatever its exit code.

    The wait ends when the command itself exits: its output goes to files, not pipes, so
    work it leaves running in the background (``curl ... &``) holds nothing of taospec's
    and goes on on its own. Past ``timeout`` (or on Ctrl-C) its whole process group, that
    background work included, is terminated, then killed; its stderr then says it timed out.
    """
    extra = dict(extra_env)
    _log(argv, extra)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=environment(extra.items()),
                start_new_session=True,
            )
        except FileNotFoundError:
            raise InvalidInput(f"{argv[0]}: command not found") from None
        try:
            _, note, timed_out = _wait(process, None, timeout)  # no pipes: the note alone
        except KeyboardInterrupt:
            _end(process)
            raise
        return Result(
            tuple(argv),
            process.returncode,
            _tail(out).decode(errors="replace"),
            (_tail(err) + note).decode(errors="replace"),
            timed_out,
        )


KEPT_OUTPUT = 1 << 16
"""The bytes of each stream :func:`run_bounded` keeps, from the end."""


def _tail(file: IO[bytes]) -> bytes:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - KEPT_OUTPUT))
    return file.read(KEPT_OUTPUT)


def _wait(
    process: subprocess.Popen[bytes], data: bytes | None, timeout: float
) -> tuple[bytes, bytes, bool]:
    """Hand ``data`` to ``process`` and wait for it as the module's notes say: its output
    (b"" for what does not go to a pipe), its stderr ending with a note saying so when it
    was stopped at ``timeout``, and whether it was."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            out, err = process.communicate(data, timeout=min(POLL_SECONDS, left))
            return out or b"", err or b"", False
        except subprocess.TimeoutExpired:
            data = None  # what is left of it is written on the next call
        if process.poll() is None and left > 0:
            continue
        if process.returncode is not None:  # it ended; what it started holds its pipes
            return (*_drain(process), False)
        _end(process)
        out, err = _drain(process)
        return out, err + f"\n(taospec: timed out after {timeout:g} s)".encode(), True


def _drain(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What ``process``, which has ended, printed, its pipes read :data:`PIPE_GRACE`
    seconds at most, then closed."""
    try:
        out, err = process.communicate(timeout=PIPE_GRACE)
        return out or b"", err or b""
    except subprocess.TimeoutExpired as held:
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return held.stdout or b"", held.stderr or b""


def _end(process: subprocess.Popen[bytes], grace: float = 1.0) -> None:
    """Terminate ``process``, or the whole process group it leads when it has one of its
    own; kill what is left after ``grace`` seconds (or at once when ``process`` ended);
    collect ``process``, waiting ``grace`` seconds at most."""
    try:
        group = os.getpgid(process.pid) == process.pid
    except ProcessLookupError:
        group = False
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if group:
            signal_group(process.pid, signum)
        else:
            process.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


class Started:
    """A command :func:`start` set going; :meth:`wait` collects it."""

    def __init__(self, argv: Sequence[str], process: subprocess.Popen[bytes]) -> None:
        self._argv = argv
        self._process = process

    def wait(self, timeout: float | None = None) -> Result:
        """Wait for the command to end and return what it printed, whatever its exit code;
        past ``timeout`` seconds it is stopped and says so in its stderr (see :func:`_wait`)."""
        return _finished(self._argv, self._process, None, timeout, check=False)

    def discard(self) -> None:
        """End a command whose answer is no longer wanted, and collect it."""
        _end(self._process)
        _drain(self._process)


def start(argv: Sequence[str], *, extra_env: Iterable[tuple[str, str]] = ()) -> Started:
    """Start ``argv`` with no input and return at once, its output captured for
    :meth:`Started.wait`: for a short query that can run while other work goes on."""
    return Started(argv, _popen(argv, None, extra_env, with_stdin=False))


def _popen(
    argv: Sequence[str],
    env: Mapping[str, str] | None,
    extra_env: Iterable[tuple[str, str]],
    *,
    with_stdin: bool,
) -> subprocess.Popen[bytes]:

    extra = dict(extra_env)
    _log(argv, extra)
    child_env = dict(env) if env is not None else environment(extra.items())
    if env is not None:
        child_env.update(extra)
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
        )
    except FileNotFoundError:
        raise NotFound(argv) from None
    except OSError as exc:
        raise not_started(argv, exc) from None


class NotFound(InvalidInput):
    """A program not on PATH, refused as input (exit 2) where nothing is recorded yet; once
    a job's record is open it is the job's failure, :attr:`failed`."""

    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__(f"{argv[0]}: command not found (needed for: {shown(argv)})")
        self.failed = not_started(argv, FileNotFoundError())


def _finished(
    argv: Sequence[str],
    process: subprocess.Popen[bytes],
    data: bytes | None,
    timeout: float | None,
    *,
    check: bool,
) -> Result:
    out, err, timed_out = _communicate(process, data, timeout)
    result = Result(
        tuple(argv),
        process.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        timed_out,
    )
    if check and not result.ok:
        raise CommandFailed(shown(argv), result.returncode, result.output())
    return result


def _communicate(
    process: subprocess.Popen[bytes], data: bytes | None, timeout: float | None
) -> tuple[bytes, bytes, bool]:

    try:
        if timeout is None:
            return (*process.communicate(data), False)
        return _wait(process, data, timeout)
    except KeyboardInterrupt:
        stop(process)
        raise


def stop(process: subprocess.Popen[bytes], grace: float = GRACE_SECONDS) -> None:
    """Wait for ``process`` to end, then terminate it, then kill it."""

    for action in (None, process.terminate, process.kill):
        if action is not None:
            try:
                action()
            except ProcessLookupError:
                return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def stream(
    argv: Sequence[str],
    *,
    extra_env: Iterable[tuple[str, str]] = (),
    on_line: Callable[[str], None],
    on_error_line: Callable[[str], None] | None = None,
    on_part: Callable[[bool, str], None] | None = None,
) -> int:
    """Run ``argv``, handing each line of its stdout to ``on_line``, and of its stderr to
    ``on_error_line`` (``on_line`` too when not given), as each line ends.

    ``on_part``, when given, is handed each stream's line not ended yet through its last
    ``\r`` as that comes (a progress bar redrawn in place may not end its line for an
    hour), with whether it is stderr's: each part once, in order, the line itself still
    handed on whole once it ends.

    The two are read apart, each a line at a time: a line one of them has begun is never
    joined to a piece of the other (``docker logs`` writes a container's two streams
    apart, a long line in pieces; read as one pipe, a stderr line written while a stdout
    line was half written broke it, and any value in it, in two). Lines go on in the order
    they end; what either leaves unended goes on last.
    """

    extra = dict(extra_env)
    _log(argv, extra)
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(extra.items()),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    sinks = {process.stdout.fileno(): on_line, process.stderr.fileno(): on_error_line or on_line}
    held = {fd: bytearray() for fd in sinks}
    parted = dict.fromkeys(sinks, 0)  # how much of each held line went to on_part
    try:
        with selectors.DefaultSelector() as selector:
            for fd in sinks:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    more = os.read(key.fd, 1 << 16)
                    if not more:
                        selector.unregister(key.fd)
                    pending = held[key.fd]
                    ended = len(pending) + more.rfind(b"\n") + 1 if b"\n" in more else 0
                    pending += more
                    for line in bytes(pending[:ended]).split(b"\n")[:-1]:
                        sinks[key.fd]((line + b"\n").decode(errors="replace"))
                    del pending[:ended]
                    if ended:
                        parted[key.fd] = 0
                    if on_part is None or not more:  # the rest goes on whole
                        continue
                    redrawn = pending.rfind(b"\r", parted[key.fd]) + 1
                    if redrawn:  # a \r is never a byte of a longer character
                        part = pending[parted[key.fd] : redrawn].decode(errors="replace")
                        on_part(key.fd == process.stderr.fileno(), part)
                        parted[key.fd] = redrawn
        for fd, rest in held.items():
            if rest:
                sinks[fd](rest.decode(errors="replace"))
        return process.wait()
    except KeyboardInterrupt:
        stop(process, grace=1.0)
        raise
    finally:
        process.stdout.close()
        process.stderr.close()


def spawn_detached(argv: Sequence[str], *, env: Mapping[str, str], cwd: str, log_path: str) -> int:
    """Start ``argv`` in ``cwd``, in a new session, output appended to ``log_path``; return
    its pid. Either folder gone is :class:`FolderGone`; the record is open by now, so any
    failure to start is the job's, not bad input."""

    _log(argv, None)
    try:
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise FolderGone(argv[0], log_path.rpartition("/")[0]) from None
    except OSError as exc:
        why = f"{argv[0]}: cannot open its log file {log_path}: {exc.strerror}"
        raise CommandFailed(argv[0], 126, why) from None
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise FolderGone(argv[0], cwd) if exc.filename == cwd else not_started(argv, exc) from None
    except OSError as exc:
        raise not_started(argv, exc) from None
    finally:
        os.close(log)
    return process.pid


class FolderGone(CommandFailed):
    """A launch whose folder (its working folder, or its log file's) was not there: made by
    the plan, and removed before the launch."""

    def __init__(self, program: str, folder: str) -> None:
        super().__init__(program, 126, f"{program}: cannot start in {folder}: no such folder")
        self.folder = folder


def not_started(argv: Sequence[str], exc: OSError) -> CommandFailed:
    """A command the kernel would not start, failed as the shell fails it: 127 for a program
    not found, 126 for one it cannot run (:class:`NotStarted`, both), or for an argument list
    too long for it."""
    if isinstance(exc, FileNotFoundError):
        return NotStarted(argv[0], 127, "command not found")
    if exc.errno == errno.E2BIG:  # the program is there; the job's arguments are too long
        return CommandFailed(argv[0], 126, f"{argv[0]}: {exc.strerror}")
    return NotStarted(argv[0], 126, exc.strerror or str(exc))


class NotStarted(CommandFailed):
    """A program the kernel would not start: not found, or not one this user may run;
    ``why`` as the shell says it."""

    def __init__(self, program: str, returncode: int, why: str) -> None:
        super().__init__(program, returncode, f"{program}: {why}")
        self.program = program
        self.why = why


def signal_group(pid: int, signum: signal.Signals) -> bool:
    """Send ``signum`` to the process group led by ``pid``; False when it is gone."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    return True


# -- processes taospec started earlier, by pid ------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None when it is gone).

    A pid with its start time names one process for good: a pid reused later
    has another start time.
    """
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def group_alive(pgid: int, started: object = None) -> bool:
    """Whether a process of the group ``pgid``, whose leader started at ``started`` (when
    given), still runs; zombies do not count.

    The leader may be gone while the processes it started live on (a shell that
    dies on SIGTERM, its ``trap '' TERM`` child). Linux gives no new process the
    id of a group that still has members, so the group is the job's for as long
    as one lives; a live leader that started at another time is a new process with
    the old id, and its group is not the job's. A zombie leader that is this
    process's child is reaped first.
    """
    leader = _stat_fields(pgid)
    if leader is not None and leader[0] not in ("Z", "X"):
        return started is None or int(leader[19]) == started
    alive(pgid)
    return any(True for _ in _members(pgid))


def group_names(pgid: int, started: object, word: str) -> bool:
    """Whether a process of the group ``pgid`` (whose leader started at ``started``, when
    given and the leader lives) has an argument holding ``word``, other than this process
    and the processes it descends from (its asker); zombies do not count."""
    leader = _stat_fields(pgid)
    if leader is not None and started is not None and int(leader[19]) != started:
        return False  # the group ended and its id was given to a new process
    asking = _ancestry(os.getpid())
    return any(
        pid not in asking and any(word in arg for arg in command_line(pid))
        for pid in _members(pgid)
    )


def _members(pgid: int) -> Iterator[int]:
    """The live processes of the group ``pgid``, zombies left out."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                yield int(entry.name)


def _ancestry(pid: int) -> set[int]:
    """``pid`` and the processes it descends from."""
    found = set()
    fields = _stat_fields(pid)
    while pid > 0 and pid not in found and fields is not None:
        found.add(pid)
        pid = int(fields[1])
        fields = _stat_fields(pid)
    return found


def command_line(pid: int) -> list[str]:
    """The arguments process ``pid`` runs with ([] when it is gone or a kernel thread)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")[:-1] if raw else []


def alive(pid: int, started: object = None) -> bool:
    """Whether process ``pid`` (started at ``started``, when given) runs and is no zombie.

    A zombie child of this process is reaped on the way.
    """
    fields = _stat_fields(pid)
    if fields is None:
        return False
    if fields[0] in ("Z", "X"):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return started is None or int(fields[19]) == started
