"""A Ctrl-C or SIGTERM that arrives while the tracker writes to the store waits for the write to
finish: an interrupt inside an SQLite write left its transaction open, and the run could then not
be marked KILLED (it stayed RUNNING)."""

from __future__ import annotations

import os
import signal

import pytest

from ptsl.ops import tracking
from ptsl.ops.stage import _interrupt


@pytest.fixture
def stage_handlers():
    """The handlers a stage script runs under (run_stage: SIGTERM unwinds like Ctrl-C)."""
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _interrupt),
                signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler)}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_inside_a_store_call_is_raised_after_it(stage_handlers, signum):
    done = []

    def store_write():
        os.kill(os.getpid(), signum)
        for _ in range(1000):  # bytecodes at which an unheld handler would have raised
            pass
        done.append(True)
        return "written"

    tracker = tracking.Tracker(client=None, run_id="run")
    with pytest.raises(KeyboardInterrupt):
        try:
            tracker._call(store_write)
        finally:
            assert done == [True]  # the write ran to its end before the interrupt
    assert tracker.failed is None  # an interrupt is no store failure
    assert signal.getsignal(signal.SIGTERM) is _interrupt  # the stage's handler is back
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_signal_nothing_is_raised(stage_handlers):
    with tracking.signals_held():
        pass
    assert signal.getsignal(signal.SIGTERM) is _interrupt
