"""``taospec render``: the exact commands a job will run, for review."""

from __future__ import annotations

from taospec import plantext
from taospec.errors import EXIT_OK
from taospec.plan import render
from taospec.spec import load_job

FORMATS = {"text": plantext.text, "json": plantext.as_json, "sh": plantext.script}


def run(file: str, *, fmt: str = "text", user: str | None = None) -> int:
    """Print the plan of ``file`` in ``fmt``."""
    plan = render(load_job(file), user=user)
    print(FORMATS[fmt](plan), end="")
    return EXIT_OK
