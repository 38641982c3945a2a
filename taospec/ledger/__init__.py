"""The TAO job-record ledger, written the way NVIDIA's TAO recorder writes it.

:mod:`~taospec.ledger.record` is the record's shape (written through
:mod:`taospec.durable`, the one durable-write helper), :mod:`~taospec.ledger.journal` the journal,
:mod:`~taospec.ledger.listing` what makes ``ls`` fast, and
:mod:`~taospec.ledger.store` the :class:`Ledger` that ties them together.
"""

from __future__ import annotations

from taospec.durable import WriteFailed, write_json_atomic
from taospec.ledger.record import SOURCES, LedgerCorrupt, Mark, Record, platform_slug
from taospec.ledger.store import Ledger, TerminalStateError, UnknownJob

__all__ = [
    "SOURCES",
    "Ledger",
    "LedgerCorrupt",
    "Mark",
    "Record",
    "TerminalStateError",
    "UnknownJob",
    "WriteFailed",
    "platform_slug",
    "write_json_atomic",
]
