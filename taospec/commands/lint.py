"""``taospec lint``: find inline secrets in a command line, a script or a manifest."""

from __future__ import annotations

import sys

from taospec import lint
from taospec.errors import EXIT_JOB_FAILED, EXIT_OK


def run(text: str, name: str) -> int:
    """Print each finding (never a value); exit 1 when there are any."""
    findings = lint.lint_text(text)
    for finding in findings:
        print(f"{name}:{finding}", file=sys.stderr)
    if findings:
        print(
            f"{name}: {len(findings)} inline secret(s); pass secrets by name (-e NAME), "
            "through stdin (--password-stdin) or, in a manifest, valueFrom.secretKeyRef",
            file=sys.stderr,
        )
        return EXIT_JOB_FAILED
    return EXIT_OK
