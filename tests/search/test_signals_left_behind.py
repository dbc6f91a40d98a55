"""A test that runs the CLI's signal handling in the test process leaves nothing behind that interrupts a later test
(tests/conftest.py no_interrupt_left, around every test).  A KeyboardInterrupt from an earlier test's leftovers took a
pytest-xdist worker down at an unrelated, pure in-process test (`make test` on a fresh clone, twice, 2026-12-02)."""
from __future__ import annotations

import signal
import sys
import threading

import pytest

from conftest import no_interrupt_left
from search import signals


def test_the_commands_handlers_and_state_are_put_back_after_it():
    before = signal.getsignal(signal.SIGTERM), sys.unraisablehook
    with no_interrupt_left():
        signals.enable()  # what search.cli.main does first
        assert signal.getsignal(signal.SIGTERM) is signals._raise_interrupt
        assert sys.unraisablehook is signals._unraisable
    assert (signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before
    assert not signals._enabled
    # the closed-output interrupt is off with it: a failed write of a stream left wrapped no longer interrupts
    guarded = signals._Guarded(_Failing(), "stdout")
    guarded.write("x")  # (raised KeyboardInterrupt here while the handling was on)
    assert signals.output_closed() == "stdout"


def test_a_pending_redelivery_is_cancelled_and_named():
    with pytest.raises(AssertionError, match=r"left what would interrupt the main thread later: a re-delivery of signal 15"):
        with no_interrupt_left():
            signals.enable()
            timer = threading.Timer(60, signals._interrupt_main, (signal.SIGTERM,))
            timer.daemon = True
            timer.start()
    timer.join(timeout=5)
    assert not timer.is_alive() and not signals.pending_redeliveries()


def test_a_cluster_watch_left_running_is_named_once():
    stop = threading.Event()
    watch = threading.Thread(target=stop.wait, name="awnn-gcs-watch", daemon=True)
    watch.start()
    try:
        with pytest.raises(AssertionError, match=r"the cluster watch \(search/tune.py watch_cluster\) still running"):
            with no_interrupt_left():
                pass
        with no_interrupt_left():  # the next test is not failed for it too
            pass
    finally:
        stop.set()


class _Failing:
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass

    def fileno(self):
        raise ValueError("no descriptor")
