"""What changed between two plans, as a unified diff of their reviewable text.

Both plans are shown with the placeholder id (``$JOB_ID``), so two renders of
the same spec read the same, and only a real change shows.
"""

from __future__ import annotations

import difflib

from taospec import plantext
from taospec.errors import TaospecError
from taospec.fingerprint import Index, target_key
from taospec.job import Target
from taospec.ledger import Ledger
from taospec.lint import redacted
from taospec.plan import Plan, plan_from_json


def text(plan: Plan | None) -> str:
    """The plan's text with the placeholder id ('' for no plan)."""
    return "" if plan is None else plantext.text(plan.with_placeholder_id())


def unified(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff of two texts ('' when they are the same)."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def last_plan(target: Target, ledger: Ledger) -> tuple[str, Plan] | None:
    """The id and stored plan of the last job launched for ``target``, if there is one."""
    job_id = Index(ledger).last_launch(target_key(target)).get("job_id")
    if not isinstance(job_id, str):
        return None
    try:
        stored = ledger.sidecar(job_id).get("plan")
        return (job_id, plan_from_json(stored)) if isinstance(stored, dict) else None
    except (TaospecError, KeyError, TypeError):
        return None


def since_last(target: Target, plan: Plan, ledger: Ledger) -> str:
    """How ``plan`` differs from the plan of the target's last job ('' when it does not),
    redacted: the last job may have written a value that this one passes by name."""
    last = last_plan(target, ledger)
    if last is None:
        return ""
    job_id, old = last
    return redacted(unified(text(old), text(plan), f"{job_id} (last run)", f"{target.name} (now)"))
