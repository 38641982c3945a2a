"""The one error root and the exit codes it maps to.

Every failure taospec expects is a :class:`TaospecError`; the CLI's single
handler prints its message and exits with its ``exit_code``. Anything else is
a bug and exits with :data:`EXIT_INTERNAL`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_INVALID = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class TaospecError(Exception):
    """A failure with a message a person can act on."""

    exit_code = EXIT_INTERNAL
    redacted_in_parts = False
    """Whether :meth:`report` is made of parts each already redacted as what it is, so that
    it is printed as it is (a redaction of its whole text could cut it)."""

    def report(self) -> str:
        """What the command line prints for this failure."""
        return f"taospec: {self}"


class InvalidInput(TaospecError):
    """Bad input or usage: a spec, a flag, an id. Nothing was written.

    ``key`` is the job file's key a refusal is about (``("docker", "host")``), so
    that a check of the file can place it at that key's line; () when it is about
    no one key.
    """

    exit_code = EXIT_INVALID

    def __init__(self, message: str, *, key: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


class JobFailed(TaospecError):
    """The job ran and ended in ERROR, CANCELED or UNKNOWN."""

    exit_code = EXIT_JOB_FAILED


class CommandFailed(TaospecError):
    """A process taospec started exited with a code it did not accept."""

    exit_code = EXIT_JOB_FAILED

    def __init__(self, argv_text: str, returncode: int, output: str = "") -> None:
        self.command = argv_text
        self.returncode = returncode
        self.output = output
        detail = f"command failed (exit {returncode}): {argv_text}"
        if output.strip():
            indented = "\n".join("    " + line for line in output.rstrip().splitlines())
            detail += "\n" + indented
        super().__init__(detail)
