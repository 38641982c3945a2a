"""The TAO job-record ledger, written the way NVIDIA's TAO recorder writes it.

:mod:`~taospec.ledger.record` is the record's shape (written through
:mod:`taospec.durable`, the one durable-write helper), :mod:`~taospec.ledger.journal` the journal,
:mod:`~taospec.ledger.listing` what makes ``ls`` fast, and
:mod:`~taospec.ledger.store` the :class:`Ledger` that ties them together.
"""

from __future__ import annotations

from taospec.durable import WriteFailed, write_atomic, write_json_atomic
from taospec.ledger.record import (
    ERR_CLASSES,
    SOURCES,
    STORAGE_TIERS,
    LedgerCorrupt,
    Mark,
    Record,
    Transition,
    check_job_id,
    platform_slug,
)
from taospec.ledger.store import Ledger, Marked, TerminalStateError, UnknownJob

__all__ = [
    "ERR_CLASSES",
    "SOURCES",
    "STORAGE_TIERS",
    "Ledger",
    "LedgerCorrupt",
    "Mark",
    "Marked",
    "Record",
    "TerminalStateError",
    "Transition",
    "UnknownJob",
    "WriteFailed",
    "check_job_id",
    "platform_slug",
    "write_atomic",
    "write_json_atomic",
]
