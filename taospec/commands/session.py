"""What the verbs that touch the ledger share: opening it, and progress lines."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from taospec import proc
from taospec.ledger import Ledger
from taospec.proc import redacted


def open_ledger(secrets: Iterable[str] = ()) -> Ledger:
    """The ledger at $TAO_STATE_DIR, redacting ``secrets`` from everything it writes."""

    values = list(secrets)
    if values:
        proc.add_secrets(values)
    return Ledger.from_env(secret_values=values)


def say(message: str) -> None:
    """A progress line for the person at the terminal (stderr, redacted)."""

    print(redacted(message), file=sys.stderr, flush=True)
