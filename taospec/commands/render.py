"""``taospec render``: the exact commands a job will run, for review.

For a pipeline, every target's plan is shown, each as if what it needs ran
first: an upstream result appears as ``$UPSTREAM_<TARGET>`` until it exists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from taospec import plantext
from taospec.errors import EXIT_OK, InvalidInput
from taospec.loader import load_jobfile
from taospec.plan import Plan, upstream_stand_in
from taospec.platforms import render


def plans(
    file: str, targets: Sequence[str] = (), user: str | None = None, versions: str | None = None
) -> list[Plan]:
    """The plans of ``targets`` (default: all) and what they need, dependencies first."""
    jobfile = load_jobfile(file, versions=versions)
    out = []
    for name in jobfile.closure(tuple(targets)):
        target = jobfile.targets[name]
        upstream = {need: upstream_stand_in(need) for need in target.needs}
        out.append(render(target.job, user=user, upstream=upstream))
    return out


def text(
    file: str,
    targets: Sequence[str] = (),
    *,
    fmt: str = "text",
    user: str | None = None,
    versions: str | None = None,
) -> str:
    """What ``render`` prints for ``file`` in ``fmt``."""
    rendered = plans(file, targets, user, versions)
    if fmt == "json":
        data = [plan.to_json() for plan in rendered]
        return json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n"
    if fmt == "sh":
        if len(rendered) != 1:
            raise InvalidInput(
                f"{file}: --format sh writes one job's script; name one target "
                f"({', '.join(p.target for p in rendered)})"
            )
        return plantext.script(rendered[0])
    return "\n".join(plantext.text(plan) for plan in rendered)


def run(
    file: str,
    targets: Sequence[str] = (),
    *,
    fmt: str = "text",
    user: str | None = None,
    versions: str | None = None,
) -> int:
    """Print the plans of ``file`` (``-``: standard input) in ``fmt``."""
    sys.stdout.write(text(file, targets, fmt=fmt, user=user, versions=versions))
    return EXIT_OK
