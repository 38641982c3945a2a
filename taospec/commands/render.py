"""``taospec render``: the exact commands a job will run, for review.

For a pipeline, every target's plan is shown, each as if what it needs ran
first: an upstream result appears as ``$UPSTREAM_<TARGET>`` until it exists.
``--format sh`` writes one target's script, which requires each such
variable set before it runs (a target's upstreams are not in it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from taospec import notify, plantext, preflight
from taospec.diagnostics import shown_file
from taospec.errors import EXIT_OK, InvalidInput
from taospec.loader import load_located
from taospec.plan import upstream_stand_ins
from taospec.platforms import render


def run(
    file: str,
    targets: Sequence[str] = (),
    *,
    fmt: str = "text",
    user: str | None = None,
    versions: str | None = None,
) -> int:
    """Print in ``fmt`` the plans of ``file``'s ``targets`` (default: all) and what they need,
    dependencies first; ``file`` ``-`` is standard input."""
    jobfile, sources = load_located(file, versions=versions)
    names = jobfile.closure(tuple(targets))
    if fmt == "sh":  # one target's script: what it needs is a variable the script requires
        chosen = jobfile.select(tuple(targets)) if targets else names
        if len(chosen) != 1:
            raise InvalidInput(
                f"{shown_file(file)}: --format sh writes one job's script; name one target "
                f"({', '.join(names)})"
            )
        names = chosen
    # A passed variable's value written in the job would be shown here: refused, as run does.
    preflight.refuse_passed_values_shown(jobfile, sources, names)
    passed = sorted({n for name in names for n in jobfile.targets[name].job.env_pass})
    notifier = notify.notifier(os.environ, passed)  # in the plans, as run puts it there
    rendered = []
    for name in names:
        target = jobfile.targets[name]
        upstream = upstream_stand_ins(target.needs)
        rendered.append(
            render(
                target.job, user=user, upstream=upstream, source=sources[name], notifier=notifier
            )
        )
    if fmt == "json":
        data = [plan.to_json() for plan in rendered]
        out = json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n"
    elif fmt == "sh":
        out = plantext.script(rendered[0], upstream_stand_ins(jobfile.targets[names[0]].needs))
    else:
        out = "\n".join(plantext.text(plan) for plan in rendered)
    sys.stdout.write(out)
    return EXIT_OK
