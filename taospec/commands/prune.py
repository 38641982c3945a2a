"""``taospec prune``: remove the containers of finished jobs, keeping their output.

A container keeps the values of the job's ``env.pass`` variables in its
configuration for as long as it exists. Prune removes the containers of jobs
that are terminal in the ledger and exited per docker, after copying their
output to ``<results_dir>/taospec.log`` (so ``taospec logs`` still works). A job
whose sidecar cannot be read (edited by hand) is named and kept, and the prune goes on.
It also removes the sidecars no record goes with: a taospec killed in the instant between
writing a job's sidecar and its record leaves one, which nothing else would remove.
"""

from __future__ import annotations

import re
import time

from taospec.commands.session import open_ledger, say
from taospec.errors import EXIT_OK, InvalidInput
from taospec.ledger import LedgerCorrupt, Record
from taospec.ledger.record import instant
from taospec.platforms import docker

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def seconds(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` (a bare number is seconds)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if match is None:
        raise InvalidInput(f"--older-than {text!r}: give a number and a unit s, m, h, d or w")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def run(*, older_than: str | None = None, dry_run: bool = False) -> int:
    """Prune every finished docker job that ended at least ``older_than`` ago, and every
    sidecar without a record written at least that long ago."""
    limit = seconds(older_than) if older_than else 0.0
    ledger = open_ledger()
    now = time.time()
    for record in ledger.list(limit=None):
        if record.platform != docker.NAME or record.terminal_state is None:
            continue
        if limit and not _ended_before(record, now - limit):
            continue
        try:
            sidecar = ledger.sidecar(record.id)
        except LedgerCorrupt as damaged:  # it names the engine: the container is left as it is
            say(f"{record.id}: kept: {damaged}")
            continue
        done = docker.prune(record, sidecar, dry_run=dry_run)
        if done is not None:
            (say if done.startswith("kept") else print)(f"{record.id}: {done}")
    for job_id, written in ledger.unrecorded_sidecars():
        if now - written < limit:
            continue
        if dry_run:
            print(f"{job_id}: would remove its sidecar, which no record goes with")
        elif ledger.remove_unrecorded_sidecar(job_id):
            print(f"{job_id}: sidecar removed: no record goes with it")
    return EXIT_OK


def _ended_before(record: Record, moment: float) -> bool:
    """Whether the job's last transition was at ``moment`` or before; a record another
    tool wrote may hold no time there, and then its job is named and kept."""
    ts = record.transitions[-1].ts
    try:
        return instant(ts).timestamp() <= moment
    except ValueError:
        say(f"{record.id}: kept: its last transition's time, {ts!r}, is no ISO 8601 UTC time")
        return False
