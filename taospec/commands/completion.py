"""What the shell completes: job ids from the ledger, target names from a job file.

Completion runs on every Tab: nothing here may print, and a ledger or job
file that cannot be read completes nothing.
"""

from __future__ import annotations

from taospec.commands.session import open_ledger
from taospec.errors import TaospecError
from taospec.loader import load_jobfile

LIMIT = 200


def job_ids(incomplete: str) -> list[tuple[str, str]]:
    """Ids starting with ``incomplete``, newest first, each with its state and platform."""
    try:
        records = open_ledger().list(limit=None, warn=_quiet)
    except (TaospecError, OSError):
        return []
    found = [(r.id, f"{r.state} {r.platform}") for r in records if r.id.startswith(incomplete)]
    return found[:LIMIT]


def targets(file: str, incomplete: str) -> list[str]:
    """The targets of ``file`` whose names start with ``incomplete``, in the file's order."""
    try:
        jobfile = load_jobfile(file)
    except (TaospecError, OSError):
        return []
    return [name for name in jobfile.targets if name.startswith(incomplete)]


def _quiet(_line: str) -> None:
    """Completion prints nothing but its answers."""
