"""``taospec ls``: the newest records, as recorded (it reads the ledger and nothing else)."""

from __future__ import annotations

import json

from taospec.commands.session import open_ledger
from taospec.errors import EXIT_OK
from taospec.ledger.record import shown_time


def ls(*, state: str | None = None, limit: int | None = 20, as_json: bool = False) -> int:
    """The newest records (recorded states; ``status`` asks the backend)."""
    ledger = open_ledger()
    records = ledger.list(state=state, limit=limit)
    if as_json:
        for record in records:
            print(json.dumps({**ledger.shown(record), "state": record.state}))
        return EXIT_OK
    rows = [("ID", "STATE", "PLATFORM", "SUBMITTED", "RESULTS")]
    for record in records:
        shown = ledger.shown(record, "platform", "results_dir")  # submitted_at is a checked time
        submitted = shown_time(record.submitted_at)
        rows.append((record.id, record.state, str(shown["platform"]), submitted, _one_line(shown)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return EXIT_OK


def _one_line(shown: dict[str, object]) -> str:
    """The results folder as one row shows it: a control character (a newline, which a path
    may hold) written as its escape, so that each job stays one line."""
    path = str(shown["results_dir"])
    return (
        path
        if path.isprintable()
        else "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
    )
