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
from collections.abc import Callable, Iterator
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
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    before = {signum: signal.signal(signum, note) for signum in INTERRUPTS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if arrived:
            signal.raise_signal(arrived[0])


def _handle_all(handler: Callable[[int, FrameType | None], Any] | signal.Handlers) -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in INTERRUPTS:
            signal.signal(signum, handler)
