"""What an interrupt means to taospec: SIGINT, SIGTERM and SIGHUP each cancel what runs.

The command line turns all three into :class:`KeyboardInterrupt` at its start,
before it knows which verb runs; a run that is cancelling what it started holds
further interrupts off so that a second Ctrl-C cannot cut the cleanup short, and a
run opening a record defers them until it knows the record it must cancel.
All act in the main thread only, the one thread Python delivers signals to.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run: each cancels what it started (as Ctrl-C does)."""


def catch() -> None:
    """Make SIGTERM and SIGHUP raise KeyboardInterrupt, as SIGINT does."""
    _handle_all(signal.default_int_handler)


def hold() -> None:
    """Ignore further interrupts while what was started is being cancelled.

    Processes started afterwards inherit this, so they cannot be cut short either.
    """
    _handle_all(signal.SIG_IGN)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold an interrupt that arrives inside the block until the block ends.

    The block's work is then either not begun or complete when the interrupt is raised:
    the handlers in place before are put back, and the first interrupt that arrived is
    raised again as if it arrived then (so a held or ignored one stays ignored). A
    handler not set from Python cannot be put back; the signal's default stands for it.
    An interrupt that lands while the handlers are being changed is raised there, and
    every handler is put back all the same.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    before = [(signum, signal.getsignal(signum)) for signum in INTERRUPTS]
    try:
        for signum in INTERRUPTS:
            signal.signal(signum, note)
        yield
    finally:
        _put_back(before)
        if arrived:
            signal.raise_signal(arrived[0])


def _put_back(
    handlers: Sequence[tuple[int, Callable[[int, FrameType | None], Any] | int | None]],
) -> None:
    """Set each signal's handler again, every one even if an interrupt is raised meanwhile."""
    if not handlers:
        return
    (signum, handler), rest = handlers[0], handlers[1:]
    try:
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    finally:
        _put_back(rest)


def _handle_all(handler: Callable[[int, FrameType | None], Any] | signal.Handlers) -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in INTERRUPTS:
            signal.signal(signum, handler)
