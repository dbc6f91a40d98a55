"""The suite's time limits scaled to the machine (tests/machine.py): a pytest-timeout mark, `wait_for`'s wait and
`run_awnn`'s limit are seconds on the machine they were set on, multiplied by this machine's slowdown (>= 1)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import machine
from conftest import ROOT
from fault_helpers import wait_for


@pytest.mark.timeout(7)
def test_a_timeout_mark_is_scaled_by_the_machines_slowdown(request):
    factor = machine.slowdown()
    assert 1.0 <= factor <= machine.MAX_SLOWDOWN
    mark = request.node.get_closest_marker("timeout")
    assert mark.args[0] == pytest.approx(7 * factor)
    assert ("timeout_as_written", 7) in request.node.user_properties


def test_wait_for_waits_the_scaled_time_and_says_so(monkeypatch):
    monkeypatch.setattr(machine, "_measured", [3.0])
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 1 s waiting for nothing"):
        wait_for(lambda: False, 0.3, "nothing", interval=0.05)  # 0.3 s as written, 0.9 s here
    assert 0.85 <= time.monotonic() - t0 < 5


@pytest.mark.parametrize("text, expected", [("2.5", 2.5), (" 1 ", 1.0), ("", None)])
def test_the_slowdown_can_be_set_by_hand(monkeypatch, text, expected):
    monkeypatch.setenv(machine.ENV, text)
    assert machine._from_env() == expected


@pytest.mark.parametrize("text", ["fast", "0.5", "nan", "inf", "-2", "1000"])
def test_a_slowdown_set_by_hand_that_is_not_a_factor_from_1_to_100_is_refused_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv(machine.ENV, text)
    with pytest.raises(ValueError, match=rf"^{machine.ENV}='{text}': expected a number from 1 to 100"):
        machine._from_env()


def test_pytest_stops_in_one_line_on_a_bad_slowdown_before_running_a_test():
    env = {**os.environ, machine.ENV: "fast"}
    env.pop("PYTEST_XDIST_WORKER", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "tests/test_machine.py::test_a_timeout_mark_is_scaled_by_the_machines_slowdown"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert f"{machine.ENV}='fast': expected a number from 1 to 100" in p.stderr, p.stderr[-2000:]
    assert "passed" not in p.stdout
