"""What the verbs that touch the ledger share: opening it, and progress lines."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from taospec import lint
from taospec.errors import InvalidInput
from taospec.ledger import Ledger, LedgerCorrupt, Record
from taospec.ledger.record import redact_document
from taospec.lint import redacted, redacted_location


def open_ledger(secrets: Iterable[str] = ()) -> Ledger:
    """The ledger at $TAO_STATE_DIR, redacting ``secrets`` from everything it writes."""

    values = list(secrets)
    if values:
        lint.register(values)
    return Ledger.from_env(secret_values=values)


def shown_data(value: object) -> object:
    """JSON data as a verb prints it: each string redacted by its field's type, before JSON
    escapes what redaction must read (a quote as ``\\"``, ``é`` as ``\\u00e9``)."""
    return redact_document(value, redacted, redacted_location)


def say(message: str) -> None:
    """A progress line for the person at the terminal (stderr, redacted)."""

    print(redacted(message), file=sys.stderr, flush=True)


def ledger_for(job_id: str) -> tuple[Ledger, Record, dict[str, object]]:
    """The ledger, redacting the values of the job's passed variables; the job's record and
    its sidecar as they are now. A record or sidecar that cannot be read (edited by hand) is
    input the verb cannot use, as a job id with no record is: exit 2, naming the file."""
    ledger = open_ledger()
    try:
        record = ledger.get(job_id)
        sidecar = ledger.sidecar(job_id)
    except LedgerCorrupt as damaged:
        raise InvalidInput(str(damaged)) from None
    plan = sidecar.get("plan")
    names = plan.get("secrets", []) if isinstance(plan, dict) else []
    values = [os.environ[n] for n in names if isinstance(n, str) and os.environ.get(n)]
    if values:
        ledger = open_ledger(values)
    unknown = [n for n in names if isinstance(n, str) and not os.environ.get(n)]
    if unknown:
        lint.register_unknown(unknown)
        say(
            f"note: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not set here: "
            "taospec cannot keep the value out of the job's own output it shows"
        )
    return ledger, record, sidecar
