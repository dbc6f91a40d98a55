"""signals.deferred: a section the interrupt must not cut short (closing the driver's MLflow runs, flushing its
writes).  The first signal that comes inside it is kept and raised as the KeyboardInterrupt at the section's end;
`then_raise=False` (a driver already ending with its own failure) keeps it counted without raising; a later signal
never raises; a closed output interrupts the same way.  Real signals, sent by a process to itself (the end-to-end case,
a Ctrl-C while a finishing comparison flushed MLflow, is in tests/system/test_signal_cut_short.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from search import signals

signals.enable()


def sleep_through(seconds):  # a signal handler runs at the next bytecode: a loop gives it many
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)


case = sys.argv[1]
done = []
try:
    with signals.deferred(then_raise=case != "failing"):
        os.kill(os.getpid(), signal.{sig})
        sleep_through(0.3)
        done.append("first")
        if case == "twice":
            os.kill(os.getpid(), signal.{sig})
            sleep_through(0.3)
        if case == "nested":
            with signals.deferred():
                sleep_through(0.1)
            done.append("nested")
        if case == "error":
            raise ValueError("its own error")
        done.append("all")
    print("after-section", done, flush=True)
    sleep_through(0.3)
    print("still-running", signals.interrupted_by(RuntimeError("x")), flush=True)
except KeyboardInterrupt:
    print("interrupted-at-end", done, flush=True)
except ValueError as e:
    print("error-went-on", e, signals.interrupted_by(e), flush=True)
"""


def _run(case: str, sig: str = "SIGINT") -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), sig=sig), case], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout + out.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_the_section_is_raised_once_it_has_run_to_its_end(sig):
    out = _run("once", sig)
    assert "interrupted-at-end ['first', 'all']" in out, out
    assert "after-section" not in out


def test_a_second_signal_inside_the_section_says_it_is_stopping_and_is_not_raised_twice():
    out = _run("twice")
    assert "interrupted-at-end ['first', 'all']" in out, out
    assert "already stopping" in out, out


def test_nested_sections_raise_at_the_outermost_end():
    out = _run("nested")
    assert "interrupted-at-end ['first', 'nested', 'all']" in out, out


def test_an_error_raised_inside_the_section_goes_on_in_place_of_the_kept_signal():
    out = _run("error")
    # the command is still stopping: what it raises now counts as the interrupt (its runs close as interrupted)
    assert "error-went-on its own error True" in out, out


def test_then_raise_false_keeps_the_signal_counted_without_raising_it():
    out = _run("failing")
    assert "after-section ['first', 'all']" in out, out
    assert "still-running True" in out, out  # interrupted_by: the command was told to stop
    assert "interrupted-at-end" not in out


CLOSED = """
import os, sys, time
sys.path.insert(0, {root!r})
from search import signals

signals.enable()
r, w = os.pipe()
os.close(r)
stream = os.fdopen(w, "w")
sys.stdout = stream
with signals.guard_output():
    try:
        with signals.deferred():
            print("to a pipe nobody reads", flush=True)
            sys.stderr.write("section-ran-on\\n")
        sys.stderr.write("not-interrupted\\n")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted-at-end %s\\n" % (signals.output_fault()[0],))
"""


def test_a_closed_output_inside_the_section_interrupts_at_its_end():
    out = subprocess.run([sys.executable, "-c", CLOSED.format(root=str(ROOT))], capture_output=True, text=True, timeout=60)
    assert "section-ran-on" in out.stderr and "interrupted-at-end stdout" in out.stderr, out.stderr
    assert "not-interrupted" not in out.stderr


AT_A_LOCK_EDGE = """
import os, signal, sys, threading, time
sys.path.insert(0, {root!r})
from search import signals

signals.enable()
enter = threading.Condition.__enter__
source = '''
def __enter__(self):
    held = self._lock.__enter__()
    if not _awnn_sent and get_ident() == _awnn_main:
        _awnn_sent.append(1)
        _awnn_os.kill(_awnn_os.getpid(), _awnn_signal.SIGINT)  # the handler runs as this call returns: the lock held
    return held
'''
threading._awnn_sent, threading._awnn_os, threading._awnn_signal = [], os, signal
threading._awnn_main = threading.main_thread().ident
space = {{}}
exec(compile(source, threading.__file__, "exec"), space)
event = threading.Event()
threading.Timer(20, event.set).start()
lock = event._cond._lock
t0 = time.monotonic()
enter.__code__ = space["__enter__"].__code__
try:
    event.wait()  # `with self._cond:` (the signal, just after its acquire), then a wait with no timeout
    print("not interrupted after %.1f s" % (time.monotonic() - t0), flush=True)
except KeyboardInterrupt:
    print("interrupted after %.2f s; lock free: %s" % (time.monotonic() - t0, lock.acquire(blocking=False)), flush=True)
os._exit(0)
"""


def test_a_signal_just_after_a_lock_was_taken_is_delivered_again_outside_it_also_into_a_wait():
    """A signal whose handler runs just after a Condition took its lock (before the `with` body) would leave the lock
    held for good; it is delivered again 50 ms on, as the signal itself, so a wait the main thread went into
    meanwhile wakes (with `_thread.interrupt_main` it waited for the wait to end: here 20 s)."""
    out = subprocess.run([sys.executable, "-c", AT_A_LOCK_EDGE.format(root=str(ROOT))], capture_output=True, text=True, timeout=60)
    line = out.stdout.strip()
    assert line.startswith("interrupted after ") and line.endswith("lock free: True"), (line, out.stderr[-2000:])
    assert float(line.split()[2].rstrip(";")) < 5, line
