"""While an `awnn` command stops on a signal, a library's log of an error that the interrupt caused in the library's
own cleanup is left out, by whichever handler would print it; everything else is still printed.

CI: a SIGTERM that landed while `awnn compare` read MLflow for its report raised the KeyboardInterrupt inside
SQLAlchemy's fetch; SQLAlchemy's cleanup then failed to close the cursor of the closed database and logged
"Error closing cursor" with both tracebacks (40 lines, through Python's last-resort handler: SQLAlchemy's loggers
have none of their own) above the command's one line (tests/system/test_signal_after_finish.py).

Deterministic: a real signal, sent by the process to itself, raises the interrupt (search/signals.py's handler); the
records are logged from its `except` the way SQLAlchemy's `_safe_close_cursor` logs them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, os, signal, sqlite3, sys, time
sys.path.insert(0, {root!r})
from search import signals

bare = logging.getLogger("sqlalchemy.pool.impl.QueuePool")  # no handler of its own: Python's last resort prints it
signals.enable()
own = logging.getLogger("somelib")  # a handler of its own, made after enable() (as Ray's and MLflow's are)
own.addHandler(logging.StreamHandler(sys.stderr))
own.propagate = False


def failed_cleanup(tag):
    for logger in (bare, own):
        try:
            raise ValueError(tag + "-plain-" + logger.name)
        except ValueError:
            logger.error("%s: plain error of %s", tag, logger.name, exc_info=True)
        logger.warning("%s: a warning of %s", tag, logger.name)


def closing_fails(tag):
    for logger in (bare, own):
        try:
            con = sqlite3.connect(":memory:")
            cur = con.cursor()
            con.close()
            cur.close()
        except sqlite3.ProgrammingError:
            logger.error("%s: Error closing cursor of %s", tag, logger.name, exc_info=True)


try:
    raise KeyboardInterrupt  # not one of the command's signals: its errors are still logged
except KeyboardInterrupt:
    closing_fails("before")
failed_cleanup("before")
try:
    os.kill(os.getpid(), signal.{sig})
    time.sleep(5)
    print("no interrupt", flush=True)
except KeyboardInterrupt:
    closing_fails("stopping")  # the library's cleanup of what the interrupt cut short
failed_cleanup("stopping")
print("done", flush=True)
"""


def _run(sig: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), sig=sig)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_librarys_log_of_an_error_the_interrupt_caused_is_left_out_and_nothing_else(sig):
    out = _run(sig)
    assert out.returncode == 0 and out.stdout == "done\n", (out.returncode, out.stdout, out.stderr)
    err = out.stderr
    for name in ("sqlalchemy.pool.impl.QueuePool", "somelib"):
        # before the signal, the same record is printed with its traceback: the filter is what leaves it out
        assert f"before: Error closing cursor of {name}\nTraceback" in err, err
        assert f"stopping: Error closing cursor of {name}" not in err, err
        for tag in ("before", "stopping"):  # records that the interrupt did not cause: kept, with their tracebacks
            assert f"{tag}: plain error of {name}\nTraceback" in err and f"ValueError: {tag}-plain-{name}" in err, err
            assert f"{tag}: a warning of {name}" in err, err
    # per logger: before, the cursor record (its error and the interrupt it was handling) and the plain one; stopping,
    # the plain one
    assert err.count("Traceback") == 2 * (2 + 1 + 1), err
