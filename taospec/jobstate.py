"""What a backend says about a job, in TAO's status vocabulary."""

from __future__ import annotations

from taospec.values import Value

PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN = (
    "PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN",
)  # fmt: skip
TERMINAL = frozenset({COMPLETE, ERROR, CANCELED})


class Status(Value):
    """One poll of a backend.

    ``message`` carries the native sub-state and exit code. ``found_ref`` is
    set when the poll discovered the launched object of a record that never
    got its RUNNING mark (a crash between launch and mark).
    """

    __slots__ = ("state", "message", "exit_code", "err_class", "found_ref")  # noqa: RUF023
    state: str
    message: str
    exit_code: int | None
    err_class: str | None
    found_ref: str | None

    def __init__(
        self,
        state: str,
        message: str,
        exit_code: int | None = None,
        err_class: str | None = None,
        found_ref: str | None = None,
    ) -> None:
        self._set(
            {
                "state": state,
                "message": message,
                "exit_code": exit_code,
                "err_class": err_class,
                "found_ref": found_ref,
            }
        )

    @property
    def terminal(self) -> bool:
        """True for COMPLETE, ERROR and CANCELED."""
        return self.state in TERMINAL
