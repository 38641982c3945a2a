"""Shell text that runs on another machine: a Brev instance or a Docker host reached by ssh.

``brev exec INSTANCE CMD`` and ``ssh HOST CMD`` both hand ONE argument to a
shell on the far side, so every remote command is built here from argument
lists: each value becomes one shell word through :func:`quote`, and only fixed
operators (``&&``, ``||``, ``if``) join them. Nothing is glued by hand.

The remote side cannot report an exit code reliably (brev returns 1 for any
failure and then runs the command again), so each remote script says what
happened in marker lines: ``TAOSPEC_<NAME>=<value>`` when a step is done, and
``TAOSPEC_FAILED=<sentence>`` when it knows it failed (see
:data:`taospec.plan.FAILED`). The scripts are POSIX sh, so they run the same
under brev's ``bash -c`` and under an ssh login shell that is dash.

The job id is still the plan's placeholder when these texts are composed;
:func:`quote` leaves it unquoted between quoted pieces (a real id is made of
``[A-Za-z0-9._-]``, which no shell treats specially), so that
:meth:`Plan.with_job_id` can fill it in later. :func:`taospec.plantext.word`
cannot be used for the inner layer: it turns the placeholder into ``"$JOB_ID"``,
which the far side does not define.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from taospec import plantext, proc, settings
from taospec.errors import InvalidInput
from taospec.plan import FAILED
from taospec.templates import quote

MARK = "TAOSPEC_"


def command(argv: Sequence[str]) -> str:
    """An argument list as one remote command, laid out like a plan's lines when long."""
    first, *rest = plantext.units(argv, quote)  # quoted for the far side's shell
    return plantext.layout([first[0]], rest)


def script(*lines: str) -> str:
    """Remote commands run one after the other."""
    return "\n".join(lines)


def marker(name: str, value: str) -> str:
    """The command that prints ``TAOSPEC_<name>=<value>``."""
    return command(["echo", f"{MARK}{name}={value}"])


def fail(reason: str) -> str:
    """The command that prints ``TAOSPEC_FAILED=<reason>`` (printf: dash's echo eats ``\\``)."""
    return f"printf %s\\\\n {quote(FAILED + reason)}"


CODE = "taospec_code"
"""The shell variable a remote script keeps a failed command's exit code in."""


def fail_exited(reason: str) -> str:
    """The command that prints ``TAOSPEC_FAILED=<reason> (exit N)``, N from :data:`CODE`."""
    return f"printf '%s (exit %s)\\n' {quote(FAILED + reason)} \"${CODE}\""


def values(output: str, name: str) -> list[str]:
    """The values of the ``TAOSPEC_<name>=`` lines in ``output``."""
    prefix = f"{MARK}{name}="
    return [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]


def guarded(
    check: str, run: str, name: str, *, present: str, done: str, failure: str, undo: str = ""
) -> str:
    """``run`` unless ``check`` succeeds; either way a ``TAOSPEC_<name>`` marker, else a failure.

    Running it twice is harmless (brev re-runs a failed remote command): the
    second run finds what the first one made and says ``present``. A failed
    ``run`` still exits 0, so brev does not run it again; ``undo`` runs first
    then, ``run``'s exit code kept in :data:`CODE` (see :func:`exited_with`), and the
    failure line says that code, which brev passes back to no one.
    """
    otherwise = "; ".join(part for part in (f"{CODE}=$?", undo, fail_exited(failure)) if part)
    return script(
        f"if {check} >/dev/null 2>&1; then {marker(name, present)}",
        f"elif {run}",
        f"then {marker(name, done)}",
        f"else {otherwise}; fi",
    )


def exited_with(codes: Iterable[int], argv: Sequence[str]) -> str:
    """Run ``argv``, its output dropped, when the command :func:`guarded` ran exited with one
    of ``codes`` (kept in :data:`CODE`).

    The code is known only on the far side: brev passes back none, so what depends on it
    is decided there.
    """
    cases = "|".join(map(str, codes))
    return f'case "${CODE}" in {cases}) {command(argv)} >/dev/null 2>&1;; esac'


def guarded_launch(
    job_id: str, run_argv: Sequence[str], *, not_started: Iterable[int], undo_argv: Sequence[str]
) -> str:
    """Start the container unless one named ``job_id`` exists: ``TAOSPEC_LAUNCH=started|exists``.

    A ``docker run`` that exits with one of ``not_started`` is followed by ``undo_argv``.
    """
    return guarded(
        command(["docker", "container", "inspect", job_id]),
        command(run_argv),
        "LAUNCH",
        present="exists",
        done="started",
        failure="docker run failed",
        undo=exited_with(not_started, undo_argv),
    )


def require_env(names: Iterable[str], where: str) -> str:
    """A failure line for each name the remote environment does not export, then CHECK=done."""
    lines = [
        f"{command(['printenv', name])} >/dev/null 2>&1 || "
        + fail(
            f"{name} (env.pass) is not set on {where}; set it there, e.g. in /etc/environment "
            "(its value never leaves the instance)"
        )
        for name in names
    ]
    return script(*lines, marker("CHECK", "done"))


def require_paths(paths: Iterable[tuple[str, str]], where: str) -> str:
    """A failure line for each ``(what, path)`` missing on the remote side, then CHECK=done."""
    lines = [
        f"{command(['test', '-e', path])} || "
        + fail(f"{what} {path} does not exist on {where}; create it there or fix the spec")
        for what, path in paths
    ]
    return script(*lines, marker("CHECK", "done"))


def prepare(
    dirs_argv: Sequence[str], spec_argv: Sequence[str] | None, embedded: str | None = None
) -> str:
    """Create the results tree, write the spec file through ``spec_argv``, say PREPARE.

    ``spec_argv`` reads the spec from its stdin: the step's own input, which ssh hands on,
    so the script stays short whatever the spec's length. brev exec hands on no input: there
    the spec is ``embedded`` in the script, printed into ``spec_argv``.
    """
    steps = [command(dirs_argv)]
    if spec_argv is not None:
        write = command(spec_argv)
        printed = command(["printf", "%s", embedded]) if embedded is not None else None
        steps.append(write if printed is None else f"{printed} | {write}")
    done = " && ".join(steps)
    return script(
        f"if {done}",
        f"then {marker('PREPARE', 'done')}",
        f"else {fail('could not create the results tree or the spec file')}; fi",
    )


def ssh_argv(url: str) -> tuple[str, ...]:
    """``ssh`` options and destination for a ``ssh://[user@]host[:port]`` DOCKER_HOST."""
    parts = urlsplit(url)
    if (
        parts.scheme != "ssh"
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise InvalidInput(
            f"docker.host {url!r}: expected ssh://[user@]host[:port]", key=("docker", "host")
        )
    try:
        port = parts.port
    except ValueError:
        raise InvalidInput(
            f"docker.host {url!r}: the port is not a number", key=("docker", "host")
        ) from None
    if parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
        raise InvalidInput(
            f"docker.host {url!r}: ssh would read a host or user that starts with '-' as an option",
            key=("docker", "host"),
        )
    if port == 0:
        raise InvalidInput(f"docker.host {url!r}: port 0 is no port", key=("docker", "host"))
    destination = f"{parts.username}@{parts.hostname}" if parts.username else parts.hostname
    return ssh(destination, *(("-p", str(port)) if port is not None else ()))


def ssh(destination: str, *options: str) -> tuple[str, ...]:
    """``ssh`` to ``destination`` that never prompts and gives up on a host that does not
    answer, or stops answering: taospec's ConnectTimeout and ServerAliveInterval are added
    only where ssh's own configuration sets none (on the command line they would override
    the user's)."""
    argv = ["ssh", "-o", "BatchMode=yes"]
    configured = _configured(destination, options)
    if configured.connect_timeout is None:
        argv += ["-o", f"ConnectTimeout={_our_timeout()}"]
    if configured.alive_interval == 0:
        argv += ["-o", f"ServerAliveInterval={_our_interval(configured.alive_count)}"]
    return (*argv, *options, "--", destination)


def connect_timeout(destination: str, *options: str) -> int:
    """The seconds ``ssh(destination, *options)`` waits for the host to answer."""
    configured = _configured(destination, options).connect_timeout
    return _our_timeout() if configured is None else configured


def _our_timeout() -> int:
    return math.ceil(settings.seconds(settings.SSH_CONNECT_TIMEOUT))  # ssh takes whole seconds


def _our_interval(count: int) -> int:
    """Seconds between keepalives such that ``count`` unanswered ones take about taospec's
    alive timeout (ssh drops the connection after ``count`` of them)."""
    return math.ceil(settings.seconds(settings.SSH_ALIVE_TIMEOUT) / max(count, 1))


class _Configured(NamedTuple):
    """What ssh's configuration gives a destination: its ConnectTimeout (None: unset), its
    ServerAliveInterval (0: unset) and ServerAliveCountMax."""

    connect_timeout: int | None = None
    alive_interval: int = 0
    alive_count: int = 3


@functools.cache
def _configured(destination: str, options: tuple[str, ...]) -> _Configured:
    """The ConnectTimeout and keepalives ssh's configuration gives ``destination``.

    ``ssh -G`` prints the configuration it would use (``connecttimeout none`` and
    ``serveraliveinterval 0`` when unset) without connecting; it is asked once per
    destination in a process, with BatchMode off: in batch mode, the user's own
    ``BatchMode yes`` included, it says ssh's keepalive default for batch use (300 s),
    which no one set. When it cannot say (no ssh, a broken config), both are unset: the
    ssh that follows reports the problem itself.
    """
    asked = ("ssh", "-G", "-o", "BatchMode=no", *options, "--", destination)
    try:
        answer = proc.run(asked, check=False)
    except InvalidInput:  # no ssh here: rendering a plan still works
        return _Configured()
    said = dict(line.partition(" ")[::2] for line in answer.stdout.splitlines())
    return _Configured(
        _number(said.get("connecttimeout")),
        _number(said.get("serveraliveinterval")) or 0,
        _number(said.get("serveralivecountmax")) or 3,
    )


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def remove_container(job_id: str) -> str:
    """Remove the job's container if there is one: ``TAOSPEC_CANCEL=removed|absent``."""
    return script(
        f"if {command(['docker', 'container', 'inspect', job_id])} >/dev/null 2>&1",
        f"then {command(['docker', 'rm', '--force', job_id])} >/dev/null && "
        + marker("CANCEL", "removed"),
        f"else {marker('CANCEL', 'absent')}; fi",
    )
