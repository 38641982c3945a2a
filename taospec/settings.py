"""The ``TAOSPEC_*`` variables that give seconds, and the one check of them all.

Each is read where it is used. The command line checks them all before any
verb runs (:func:`check`), so a bad value is a usage error (exit 2) before
anything starts, never a failure half-way through a build.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import NamedTuple

from taospec.errors import InvalidInput


class Seconds(NamedTuple):
    """A setting's default, what its seconds are for, and whether 0 is allowed."""

    default: float
    what: str
    zero: bool


PROGRESS_INTERVAL = "TAOSPEC_PROGRESS_INTERVAL"
SUBMIT_BACKOFF = "TAOSPEC_SUBMIT_BACKOFF"
RETRY_INTERVAL = "TAOSPEC_RETRY_INTERVAL"
LAUNCH_GRACE = "TAOSPEC_LAUNCH_GRACE"
SLURM_CANCEL_WAIT = "TAOSPEC_SLURM_CANCEL_WAIT"
SSH_CONNECT_TIMEOUT = "TAOSPEC_SSH_CONNECT_TIMEOUT"
SSH_ALIVE_TIMEOUT = "TAOSPEC_SSH_ALIVE_TIMEOUT"

SECONDS = {
    PROGRESS_INTERVAL: Seconds(60.0, "between lines", zero=False),
    SUBMIT_BACKOFF: Seconds(5.0, "to wait before retrying a failed submit", zero=True),
    RETRY_INTERVAL: Seconds(
        5.0, "between the attempts of a step waiting for its marker line", zero=True
    ),
    LAUNCH_GRACE: Seconds(120.0, "a record may wait for its launch", zero=True),
    SLURM_CANCEL_WAIT: Seconds(60.0, "to wait for a cancelled Slurm job to end", zero=True),
    SSH_CONNECT_TIMEOUT: Seconds(
        30.0, "ssh waits for a host to answer where ssh's config sets none", zero=False
    ),
    SSH_ALIVE_TIMEOUT: Seconds(60.0, "ssh waits for a connected host that went silent", zero=False),
}


def seconds(name: str, environ: Mapping[str, str] = os.environ) -> float:
    """The seconds ``$name`` gives (its default when unset): finite and above 0, or 0 where
    the setting allows it; anything else is refused, saying what the seconds are for."""
    setting = SECONDS[name]
    raw = environ.get(name, "").strip()
    if not raw:
        return setting.default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0 or (value == 0 and not setting.zero):
        raise InvalidInput(
            f"{name}={raw!r}: give the seconds {setting.what}, e.g. {setting.default:g}"
        )
    return value


def check(environ: Mapping[str, str] = os.environ) -> None:
    """Refuse the first setting whose value is not seconds."""
    for name in SECONDS:
        seconds(name, environ)
