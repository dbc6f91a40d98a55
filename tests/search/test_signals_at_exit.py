"""A signal that reaches an `awnn` command in the interpreter's finalization (after the exit handlers, while it tears
down torch's and Ray's modules) leaves the exit code the command decided.  Python's finalization gives every signal
that has a Python handler its default action back, so such a signal killed the process: exit -2 / -15 in place of
130 (tests/system/test_signal_repeated.py's Ctrl-C pressed twice, once Ray's shutdown took 0.3 s and no longer 1.4),
or in place of 0 after a finished comparison (search/signals.py, `_ignored_at_exit`).

Deterministic: the signal is sent by the finalizer of an object of `__main__`, which Python runs when it clears the
modules, after it has restored the signals' default actions."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
sig = getattr(signal, {sig!r})
if {cli!r}:
    from search import signals
    signals.enable()
else:  # a Python handler of the script's own: what the finalization resets
    signal.signal(sig, lambda *a: None)


class Late:
    def __del__(self):  # runs as the modules are cleared, after the signals' handlers were reset
        os.kill(os.getpid(), sig)
        time.sleep(0.05)
        print("survived", flush=True)


late = Late()
sys.exit(7)
"""


def _run(sig: str, cli: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), sig=sig, cli=cli)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_in_the_interpreters_finalization_leaves_the_commands_exit_code(sig):
    out = _run(sig, cli=True)
    assert out.returncode == 7, (out.returncode, out.stdout, out.stderr)
    assert "survived" in out.stdout


def test_without_it_such_a_signal_kills_the_process():
    """The premise: Python's finalization does restore a handled signal's default action (if a later Python stops
    doing so, this fails and the exit handler can go)."""
    out = _run("SIGTERM", cli=False)
    assert out.returncode == -signal.SIGTERM, (out.returncode, out.stdout, out.stderr)
    assert "survived" not in out.stdout
