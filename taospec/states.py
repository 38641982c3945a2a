"""The TAO status vocabulary, and what one poll of a backend says in it."""

from __future__ import annotations

from typing import NamedTuple

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
    docker created and nobody started).
    """

    state: str
    message: str
    exit_code: int | None = None
    err_class: str | None = None
    found_ref: str | None = None
    gone: bool = False
    stalled: bool = False

    @property
    def terminal(self) -> bool:
        """True for COMPLETE, ERROR and CANCELED."""
        return self.state in TERMINAL
