"""How far a running job has got, from what its trainer writes.

TAO's trainers write ``status.json`` in the action's results folder: JSON
Lines, one object per event (some writers emit one JSON list instead), each
with ``status`` and optionally ``message``, ``phase``, ``epoch``,
``max_epoch`` and ``kpi`` (metric name to number). :func:`read` merges the
events into the latest state, tolerating a last line still being written;
:func:`describe` says it in a few words. :mod:`taospec.ticker` makes the
progress lines of a build out of it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple

STATUS_FILE = "status.json"
_SKIP = " \t\r\n,[]"


class Progress(NamedTuple):
    """The latest state a ``status.json`` describes."""

    status: str = ""
    epoch: int | None = None
    max_epoch: int | None = None
    kpi: Mapping[str, float] = MappingProxyType({})
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
    return {**progress._asdict(), "kpi": dict(progress.kpi)}


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


def describe(progress: Progress) -> str:
    """Epoch and KPIs, or the phase and message when there are none yet."""
    epoch = ""
    if progress.epoch is not None:
        total = f"/{progress.max_epoch}" if progress.max_epoch is not None else ""
        epoch = f"epoch {progress.epoch}{total}"
    kpis = " ".join(f"{name}={value:.4g}" for name, value in progress.kpi.items())
    parts = [part for part in (epoch, kpis) if part]
    return "  ".join(parts or [part for part in (progress.phase, progress.message) if part])
