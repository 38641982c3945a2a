"""``make bench``: measure every figure, print the table, write latest.json and README.md.

    python bench/run.py            # the whole suite (writes bench/results/latest.json)
    python bench/run.py render ls  # only some groups; prints, writes nothing

Groups: render, validate, submit, ledger, transitions, pipeline, logs. Every figure
is measured as a person meets it: a new process each time, on a job file whose
bytes no earlier run has seen. Before measuring, taospec's modules are compiled
to bytecode, as pip does when it installs a wheel, so no run pays for compiling
them. A figure that misses its target is profiled once more (bench/hotspots.py).
"""

from __future__ import annotations

import compileall
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone

from ledger_scale import ledger_figures, transition_figures
from logs import logs_figures
from pipeline import pipeline_figures
from report import RESULTS, Figure, text_table, write_readme
from startup import render_figures, validate_figures
from submit import submit_figures
from workspace import ROOT, Workspace

GROUPS: dict[str, Callable[[Workspace], list[Figure]]] = {
    "render": render_figures,
    "validate": validate_figures,
    "submit": submit_figures,
    "ledger": ledger_figures,
    "transitions": transition_figures,
    "pipeline": pipeline_figures,
    "logs": logs_figures,
}


def main(argv: list[str]) -> int:
    """Run the chosen groups (default: all) and report."""
    chosen = argv or list(GROUPS)
    unknown = [name for name in chosen if name not in GROUPS]
    if unknown:
        print(f"unknown group {unknown[0]!r}; groups: {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    compileall.compile_dir(ROOT / "taospec", quiet=1)
    started = time.monotonic()
    figures: list[Figure] = []
    workspace = Workspace()
    try:
        for name in chosen:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            begun = time.monotonic()
            figures += GROUPS[name](workspace)
            print(f"bench: {name} took {time.monotonic() - begun:.0f} s", file=sys.stderr)
    finally:
        workspace.remove()
    elapsed = time.monotonic() - started
    print(text_table(figures), end="")
    print(f"\nwhole suite: {elapsed:.0f} s")
    if argv:
        return 0
    results = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "seconds": round(elapsed, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}",
        },
        "figures": [figure.to_json() for figure in figures],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    temporary = RESULTS.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    temporary.replace(RESULTS)
    write_readme(results)
    print(f"wrote {RESULTS.relative_to(ROOT)} and README.md's performance section")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
