"""``taospec validate``: check job files, report every problem with its place.

A file found valid before, byte for byte and with the same taospec, is
known valid from :mod:`taospec.cache`; a file with problems is checked afresh.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from taospec.cache import check_valid
from taospec.diagnostics import SpecError
from taospec.errors import EXIT_INVALID, EXIT_OK


def run(files: Sequence[str], *, quiet: bool = False) -> int:
    """Validate each file; exit 2 if any has a problem."""
    failed = 0
    for file in files:
        try:
            check_valid(file)
        except SpecError as exc:
            failed += 1
            print(exc, file=sys.stderr)
            continue
        if not quiet:
            print(f"{file}: ok")
    if failed:
        print(f"{failed} of {len(files)} job files are invalid", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK
