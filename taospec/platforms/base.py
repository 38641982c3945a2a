"""What every platform provides: the protocol the executor and the verbs call.

A platform is a module whose functions satisfy :class:`Platform`. It renders
a job's steps (:meth:`Platform.plan`), starts the job with the plan's last
step (:meth:`Platform.submit`), and answers the verbs for a launched job from
its record and sidecar (``status``, ``logs``, ``log_tail``, ``cancel``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, Protocol

from taospec import proc
from taospec.plan import Context, Plan, Step
from taospec.states import Status

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record

Write = Callable[[str], None]
"""Where a verb hands what it reads (the job's output)."""


class Launched(NamedTuple):
    """A started job: the backend's handle, and facts the other verbs will need."""

    ref: str
    facts: Mapping[str, object] = MappingProxyType({})


class EndedFirst(Exception):
    """Raised by a platform's ``cancel`` when the job had already ended on its own.

    Nothing was stopped or removed; ``status`` is the job's real outcome.
    """

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class StepRunner(Protocol):
    """How a platform's launch runs a step: with the submit's environment and progress."""

    def run(self, step: Step) -> proc.Result:
        """Run ``step`` to its end; raise :class:`taospec.errors.CommandFailed` on failure."""
        ...

    def run_unchecked(self, step: Step) -> proc.Result:
        """Run ``step`` to its end and return its result, whatever its exit code."""
        ...

    def spawn(self, step: Step) -> int:
        """Start ``step`` detached (its output to ``step.log_path``); return its pid."""
        ...

    def progress(self, text: str) -> None:
        """Tell the person what is happening."""
        ...


class Platform(Protocol):
    """Where a job runs."""

    def plan(self, context: Context) -> Plan:
        """The job's steps; the last one launches it."""
        ...

    def submit(self, step: Step, plan: Plan, runner: StepRunner) -> Launched:
        """Run the launch step and return the backend's handle."""
        ...

    def status(self, record: Record, sidecar: Mapping[str, object]) -> Status:
        """Ask the backend (never just the record) what state the job is in."""
        ...

    def logs(
        self,
        record: Record,
        sidecar: Mapping[str, object],
        *,
        tail: int | None,
        follow: bool,
        on_line: Write,
        on_said: Write | None = None,
        on_part: Write | None = None,
    ) -> int:
        """Hand the job's output to ``on_line`` (following it while it runs); 0 when read.
        Of a read that failed, ``on_said`` may be told what exited and how, and why when
        what read the output said so in a line where the job's output comes (that line,
        told apart from the output). A follow given ``on_part`` hands it each part of a
        line not ended yet through its last ``\\r`` as it comes (a progress bar redrawn
        in place, see :class:`~taospec.platforms.common.Redrawn`), and ``on_line`` the
        rest of the line once it ends."""
        ...

    def log_tail(
        self, record: Record, sidecar: Mapping[str, object], lines: int = 50, writing: bool = False
    ) -> str:
        """The last ``lines`` lines of the job's output; of one the job may still be
        ``writing``, as a look at it shows them
        (:func:`~taospec.platforms.common.while_writing`)."""
        ...

    def cancel(self, record: Record, sidecar: Mapping[str, object]) -> str:
        """Stop the job; say what was done (docker and local raise :class:`EndedFirst`
        instead when the job ended on its own before it could be stopped)."""
        ...


def last_lines(lines: list[str], tail: int | None) -> list[str]:
    """The last ``tail`` of ``lines`` (all of them when ``tail`` is None, none when 0)."""
    return lines if tail is None else lines[max(len(lines) - tail, 0) :]
