"""How far a running job has got, in one line, for output that is not a terminal.

TAO's trainers write ``status.json`` in the action's results folder: JSON
Lines, one object per event (some writers emit one JSON list instead), each
with ``status`` and optionally ``message``, ``phase``, ``epoch``,
``max_epoch`` and ``kpi`` (metric name to number). :func:`read` merges the
events into the latest state, tolerating a last line still being written;
:func:`line` formats it, or the job's last output line when there is no
``status.json``; :class:`Ticker` says when the next line is due.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field

from taospec import settings

STATUS_FILE = "status.json"
DEFAULT_INTERVAL = settings.SECONDS[settings.PROGRESS_INTERVAL].default
WIDTH = 160
_SKIP = " \t\r\n,[]"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Progress:
    """The latest state a ``status.json`` describes."""

    status: str = ""
    epoch: int | None = None
    max_epoch: int | None = None
    kpi: Mapping[str, float] = field(default_factory=dict)
    phase: str = ""
    message: str = ""


def find(results_dir: str | os.PathLike[str], action: str | None = None) -> str | None:
    """``<results_dir>/<action>/status.json`` or ``<results_dir>/status.json``, else the newest
    ``<results_dir>/*/status.json``; None when there is none (yet)."""
    root = os.fspath(results_dir)
    named = [os.path.join(root, action, STATUS_FILE)] if action else []
    for path in (*named, os.path.join(root, STATUS_FILE)):
        if os.path.isfile(path):
            return path
    try:
        with os.scandir(root) as entries:
            found = [os.path.join(e.path, STATUS_FILE) for e in entries if e.is_dir()]
    except OSError:
        return None
    return max(
        (path for path in found if os.path.isfile(path)),
        key=lambda path: (os.stat(path).st_mtime, path),
        default=None,
    )


def of_results(results_dir: str | os.PathLike[str], action: str | None = None) -> Progress | None:
    """The merged ``status.json`` under a job's results directory, when it is readable here."""
    found = find(results_dir, action)
    return read(found) if found is not None else None


def to_json(progress: Progress) -> dict[str, object]:
    """``progress`` as the JSON ``status --json`` and ``show`` print."""
    return asdict(progress)


def read(path: str | os.PathLike[str]) -> Progress | None:
    """The merged events of ``path``; None when it holds none (yet) or cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            text = stream.read()
    except OSError:
        return None
    return merge(events(text))


def events(text: str) -> Iterator[dict[str, object]]:
    """Each JSON object in ``text``: JSON Lines, one JSON list, or either cut off mid-write."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        while position < len(text) and text[position] in _SKIP:
            position += 1
        if position >= len(text):
            return
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            newline = text.find("\n", position)
            if newline < 0:
                return  # a last line still being written
            position = newline + 1
            continue
        if isinstance(value, dict):
            yield value


def merge(found: Iterable[dict[str, object]]) -> Progress | None:
    """The latest of each field over ``found``, KPIs merged with the newest value winning."""
    latest: dict[str, object] = {}
    kpi: dict[str, float] = {}
    count = 0
    for event in found:
        count += 1
        kpi.update(_numbers(event.get("kpi")))
        latest.update((key, value) for key, value in event.items() if _given(value))
    if not count:
        return None
    return Progress(
        status=_text(latest.get("status")),
        epoch=_int(latest.get("epoch")),
        max_epoch=_int(latest.get("max_epoch")),
        kpi=kpi,
        phase=_text(latest.get("phase")),
        message=_text(latest.get("message")),
    )


def _given(value: object) -> bool:
    return value is not None and value != ""


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value)


def _numbers(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {
        str(name): float(number)
        for name, number in value.items()
        if isinstance(number, int | float) and not isinstance(number, bool)
    }


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

    Without ``progress`` the job's ``last_output`` line stands in (the caller
    redacts it first); the result is cut to :data:`WIDTH` characters.
    """
    detail = describe(progress) if progress is not None else _printable(last_output)
    text = "  ".join(part for part in (name, state, elapsed(seconds), detail) if part)
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def describe(progress: Progress) -> str:
    """Epoch and KPIs, or the phase and message when there are none yet."""
    epoch = ""
    if progress.epoch is not None:
        total = f"/{progress.max_epoch}" if progress.max_epoch is not None else ""
        epoch = f"epoch {progress.epoch}{total}"
    kpis = " ".join(f"{name}={value:.4g}" for name, value in progress.kpi.items())
    parts = [part for part in (epoch, kpis) if part]
    return "  ".join(parts or [part for part in (progress.phase, progress.message) if part])


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
