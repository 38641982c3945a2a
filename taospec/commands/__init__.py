"""One module per command; each exposes a function that returns an exit code."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Iterable

    from taospec.ledger import Ledger


def open_ledger(secrets: Iterable[str] = ()) -> Ledger:
    """The ledger at $TAO_STATE_DIR, redacting ``secrets`` from everything it writes."""
    from taospec.ledger import Ledger

    values = list(secrets)
    if values:
        from taospec import proc

        proc.add_secrets(values)
    return Ledger.from_env(secret_values=values)


def say(message: str) -> None:
    """A progress line for the person at the terminal (stderr, redacted)."""
    from taospec.proc import redacted

    print(redacted(message), file=sys.stderr, flush=True)
