"""An interrupt deferred over a block is raised once the block is over, and only then."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from taospec import interrupts


@pytest.mark.parametrize("signum", interrupts.INTERRUPTS)
def test_an_interrupt_inside_a_deferred_block_is_raised_when_it_ends(signum: int) -> None:
    interrupts.catch()
    reached: list[str] = []

    def block() -> None:
        with interrupts.deferred():
            os.kill(os.getpid(), signum)
            os.kill(os.getpid(), signal.SIGINT)  # a second one adds nothing
            reached.append("the block's end")

    with pytest.raises(KeyboardInterrupt):
        block()
    assert reached == ["the block's end"]
    for each in interrupts.INTERRUPTS:
        assert signal.getsignal(each) is signal.default_int_handler


def test_a_block_without_an_interrupt_leaves_the_handlers_as_they_were() -> None:
    interrupts.catch()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with interrupts.deferred():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_an_interrupt_held_off_before_the_block_stays_held_off() -> None:
    interrupts.hold()
    with interrupts.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_an_error_in_the_block_gives_way_to_the_interrupt() -> None:
    interrupts.catch()

    def block() -> None:
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            raise OSError("the open failed")

    with pytest.raises(KeyboardInterrupt) as raised:
        block()
    assert isinstance(raised.value.__context__, OSError)


def test_a_worker_thread_defers_nothing_it_could_not_see() -> None:
    # Python runs handlers in the main thread only; a worker leaves them alone.
    interrupts.catch()
    seen: list[object] = []

    def worker() -> None:
        with interrupts.deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=10)
    assert seen == [signal.default_int_handler]


@pytest.mark.parametrize("at", ["setting", "putting back"])
def test_an_interrupt_while_the_handlers_change_leaves_every_one_as_it_was(
    monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    # A signal not yet held off (or put back already) raises between two of the changes;
    # a handler left as the block's would swallow every later Ctrl-C.
    interrupts.catch()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    was = {signum: signal.getsignal(signum) for signum in interrupts.INTERRUPTS}
    real = signal.signal
    calls: list[int] = []

    def changing(signum: int, handler: object) -> object:
        old = real(signum, handler)
        calls.append(signum)
        if len(calls) == (2 if at == "setting" else 4):
            raise KeyboardInterrupt  # landed just after this change
        return old

    monkeypatch.setattr(interrupts.signal, "signal", changing)

    def block() -> None:
        with interrupts.deferred():
            pass

    with pytest.raises(KeyboardInterrupt):
        block()
    monkeypatch.undo()
    assert {signum: signal.getsignal(signum) for signum in interrupts.INTERRUPTS} == was
