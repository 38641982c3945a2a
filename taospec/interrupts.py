"""What an interrupt means to taospec: SIGINT, SIGTERM and SIGHUP each cancel what runs.

The command line turns all three into :class:`KeyboardInterrupt` at its start,
before it knows which verb runs; a run that is cancelling what it started holds
further interrupts off so that a second Ctrl-C cannot cut the cleanup short.
Both act in the main thread only, the one thread Python delivers signals to.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
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


def _handle_all(handler: Callable[[int, FrameType | None], Any] | signal.Handlers) -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in INTERRUPTS:
            signal.signal(signum, handler)
