"""The TAO status vocabulary, and what one poll of a backend says in it."""

from __future__ import annotations

from typing import NamedTuple

from taospec.errors import InvalidInput

PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN = (
    "PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN",
)  # fmt: skip
STATES = (PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN)
TERMINAL = frozenset({COMPLETE, ERROR, CANCELED})
FAILED = "FAILED"
"""A target's outcome when it failed before a backend took it; no record holds it."""


class Status(NamedTuple):
    """One poll of a backend.

    ``message`` carries the native sub-state and exit code. ``found_ref`` is
    set when the poll discovered the launched object of a record that never
    got its RUNNING mark (a crash between launch and mark). ``gone`` is set
    when the backend confirmed that no object of the job exists (a container
    removed outside taospec, a process that left no exit code); ``stalled``
    when the object exists but only its launch could start it (a container
    docker created and nobody started). ``unreachable`` says which backend did
    not answer and what to check (a Docker engine that is down or misnamed).
    """

    state: str
    message: str
    exit_code: int | None = None
    err_class: str | None = None
    found_ref: str | None = None
    gone: bool = False
    stalled: bool = False
    unreachable: str = ""

    @property
    def terminal(self) -> bool:
        """True for COMPLETE, ERROR and CANCELED."""
        return self.state in TERMINAL


def answered(status: Status, cannot: str, then: str = "nothing was changed") -> Status:
    """``status``, unless its backend did not answer: then refused (exit 2, as ``run``
    refuses an engine that does not answer) with ``cannot`` (``cannot cancel ID``), what
    to check, and ``then`` (what that leaves), before anything is asked of the job or
    recorded."""
    if status.unreachable:
        raise InvalidInput(f"{cannot}: {status.unreachable}; {then}")
    return status
