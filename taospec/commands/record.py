"""``taospec record``: the ledger's own verbs, flag for flag like the TAO recorder.

A hand-written script, or ``taospec render --format sh`` output, drives the
ledger with these: ``open`` prints the new id, ``mark`` appends a transition.
As with the recorder, a refusal (no such record, a terminal state, a bad id or
state root, a write that failed) prints its message alone on stderr and exits 1;
a usage error exits 2.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import ParamSpec

from taospec.commands.session import open_ledger
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK, InvalidInput, TaospecError
from taospec.ledger import Ledger, LedgerCorrupt, Mark
from taospec.ledger.record import check_job_id, require_text
from taospec.lint import redacted

_P = ParamSpec("_P")
EXIT_REFUSED = EXIT_JOB_FAILED
"""What the recorder exits with when it refuses (its ``SystemExit("message")``)."""


def refusing(verb: Callable[_P, int]) -> Callable[_P, int]:
    """``verb``, with a taospec error turned into its bare message, redacted (it may quote
    an id or a path it refuses), on stderr and exit 1."""

    @functools.wraps(verb)
    def refused(*args: _P.args, **kwargs: _P.kwargs) -> int:
        try:
            return verb(*args, **kwargs)
        except TaospecError as refusal:
            message = str(refusal)
            print(
                message if refusal.redacted_in_parts else redacted(message),
                file=sys.stderr,
                flush=True,
            )
            return EXIT_REFUSED

    return refused


@refusing
def open_record(
    *,
    platform: str,
    image: str,
    network_arch: str,
    action: str,
    storage_tier: str,
    results_root: str | None,
    results_dir: str | None,
    upload_excludes: Sequence[str],
    parent_job: str | None,
    retry_of: str | None,
) -> int:
    """Open a record and print its id."""
    if bool(results_dir) == bool(results_root):
        raise InvalidInput("open: pass exactly one of --results-dir or --results-root")
    for flag, value in (
        ("--image", image),
        ("--network-arch", network_arch),
        ("--action", action),
    ):
        require_text(flag, value, prefix="open: ")
    record = open_ledger().open(
        platform=platform,
        image=image,
        network_arch=network_arch,
        action=action,
        storage_tier=storage_tier,
        results_root=results_root,
        results_dir=results_dir,
        upload_excludes=upload_excludes,
        parent_job=parent_job,
        retry_of=retry_of,
    )
    print(record.id)
    return EXIT_OK


@refusing
def mark(
    job_id: str,
    *,
    state: str,
    message: str,
    source: str,
    backend_ref: str | None,
    err_class: str | None,
) -> int:
    """Append a transition; a repeated terminal state appends nothing and says so."""
    check_job_id(job_id)  # before the state root, as the recorder checks them
    change = Mark(state, message, source, backend_ref, err_class)
    marked = open_ledger().apply(job_id, change)
    if not marked.appended and message:
        print(redacted(f"note: {job_id} already terminal; message not appended"), file=sys.stderr)
    return EXIT_OK


@refusing
def show(job_id: str) -> int:
    """Print the record as the recorder's ``show`` does: indented JSON of the redacted record."""
    check_job_id(job_id)  # before the state root, as the recorder checks them
    print(json.dumps(open_ledger().document(job_id), indent=2))
    return EXIT_OK


@refusing
def list_records(*, as_json: bool) -> int:
    """One line per record in file-name order: id, platform, last state, results_dir.

    Each field is printed as the recorder prints it (:func:`listed_line`). A file
    that holds no JSON object prints ``<name>\\t<corrupt>`` on stderr and the
    listing goes on. ``as_json`` prints each whole record as a JSON line with its
    ``state``, and every other file as ``<corrupt>``.
    """
    ledger = open_ledger()
    for path, found in ledger.files():
        line = None if isinstance(found, LedgerCorrupt) else _listed(ledger, path, found, as_json)
        if line is None:
            print(f"{stem(path)}\t<corrupt>", file=sys.stderr, flush=True)
        else:
            print(line)
    return EXIT_OK


def _listed(ledger: Ledger, path: str, data: object, as_json: bool) -> str | None:
    """The line listing the JSON ``data`` read from ``path``; None when it is not to be listed."""
    if as_json:
        try:
            record = ledger.typed(path, data)
        except LedgerCorrupt:
            return None
        return json.dumps({**ledger.shown(record), "state": record.state})
    if not isinstance(data, dict):
        return None  # the recorder stops the listing with a traceback here
    return listed_line(stem(path), ledger.redacted(data))


def stem(path: str) -> str:
    """The name of the file at ``path`` without ``.json``, as pathlib's ``stem`` gives it:
    the recorder names a file so. A name that is only ``.json`` has no suffix to drop."""
    name = path.rpartition("/")[2]
    return name[: -len(".json")] if len(name) > len(".json") else name


def listed_line(name: str, data: Mapping[str, object]) -> str:
    """The recorder's line for the record ``data`` in ``<name>.json``.

    A field the record lacks is ``?`` (the id: the file's name), any other value is
    printed as ``str()`` prints it (``None`` for null). Where the recorder stops
    with a traceback, on transitions whose last item has no state, the state is ``?``.
    """
    steps = data.get("transitions")
    state: object = "?"
    if isinstance(steps, list) and steps and isinstance(steps[-1], dict):
        state = steps[-1].get("state", "?")
    fields = (data.get("id", name), data.get("platform", "?"), state, data.get("results_dir", "?"))
    return "\t".join(map(str, fields))
