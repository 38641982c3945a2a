"""``taospec doctor``: print each preflight check and what to do about a failing one."""

from __future__ import annotations

from taospec.doctor import Check
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK

INDENT = "      "


def run(checks: list[Check]) -> int:
    """One line per check (``ok``/``FAIL``, name, detail), advice indented under a failure;
    exit 1 when any failed."""
    for check in checks:
        print(line(check))
        if not check.ok and check.advice:
            print(INDENT + check.advice)
    return EXIT_OK if all(check.ok for check in checks) else EXIT_JOB_FAILED


def line(check: Check) -> str:
    """``ok    docker engine: version 20.10.24``."""
    mark = "ok" if check.ok else "FAIL"
    return f"{mark:<6}{check.name}: {check.detail}"
