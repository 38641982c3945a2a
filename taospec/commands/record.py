"""``taospec record``: the ledger's own verbs, flag for flag like the TAO recorder.

A hand-written script, or ``taospec render --format sh`` output, drives the
ledger with these: ``open`` prints the new id, ``mark`` appends a transition.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from taospec.commands import open_ledger
from taospec.errors import EXIT_OK


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


def mark(
    job_id: str,
    *,
    state: str,
    message: str,
    source: str,
    backend_ref: str | None,
    err_class: str | None,
) -> int:
    """Append a transition (a repeated terminal state is a no-op)."""
    open_ledger().mark(
        job_id,
        state,
        message=message,
        source=source,
        backend_ref=backend_ref,
        err_class=err_class,
    )
    return EXIT_OK


def show(job_id: str) -> int:
    """Print one record as JSON."""
    print(json.dumps(open_ledger().get(job_id).to_json(), indent=2))
    return EXIT_OK


def list_records(*, state: str | None, limit: int | None) -> int:
    """Print records newest first, one JSON object per line."""
    for record in open_ledger().list(state=state, limit=limit):
        print(json.dumps(record.to_json()))
    return EXIT_OK
