"""The progress lines of a build: when the next is due, and what it says.

A line names the target, its state, how long it has run and how far it has
got (:func:`taospec.progress.describe`), or the job's last output line when
its trainer writes no ``status.json``; :class:`Ticker` says when the next
line is due.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from taospec import settings
from taospec.lint import redacted
from taospec.progress import Progress, describe

DEFAULT_INTERVAL = settings.SECONDS[settings.PROGRESS_INTERVAL].default
WIDTH = 160
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def elapsed(seconds: float) -> str:
    """``42s``, ``4m05s``, ``1h02m``, ``2d03h``."""
    whole = max(0, int(seconds))
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def line(
    name: str,
    state: str,
    seconds: float,
    progress: Progress | None,
    *,
    last_output: str = "",
) -> str:
    """``<name>  RUNNING  1h02m  epoch 7/10  train/avg_loss=0.412 val_acc=0.88``.

    Without ``progress`` the job's ``last_output`` line stands in. The result is
    redacted, then cut to :data:`WIDTH` characters: a cut through a secret leaves a part
    that redaction no longer finds, and ``status.json`` is the job's own text.
    """
    detail = describe(progress) if progress is not None else _printable(last_output)
    text = redacted("  ".join(part for part in (name, state, elapsed(seconds), detail) if part))
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _printable(output: str) -> str:
    """The last thing a progress bar drew: after the last carriage return, escapes removed."""
    lines = [text for text in output.splitlines() if text.strip()]
    last = lines[-1] if lines else ""
    frames = [frame for frame in _ANSI.sub("", last).split("\r") if frame.strip()]
    return _CONTROL.sub("", frames[-1]).strip() if frames else ""


@dataclass(slots=True)
class Ticker:
    """Says when the next progress line is due: one ``interval`` after the last one."""

    interval: float = DEFAULT_INTERVAL
    clock: Callable[[], float] = time.monotonic
    _next: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._next = self.clock() + self.interval

    def due(self) -> bool:
        """True when a line is due now; the next one is then due one interval later."""
        now = self.clock()
        if now < self._next:
            return False
        self._next = now + self.interval
        return True

    def wait(self) -> float:
        """Seconds until the next line is due (0 when it is due now)."""
        return max(0.0, self._next - self.clock())


def interval(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between progress lines: ``$TAOSPEC_PROGRESS_INTERVAL``, else 60."""
    return settings.seconds(settings.PROGRESS_INTERVAL, environ)
