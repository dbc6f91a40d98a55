"""How much slower this machine runs the suite than the machine its time limits were set on, and those limits scaled.

The suite's limits (pytest-timeout marks, `wait_for`'s waits, `run_awnn`'s and a driver's `wait`) were sized in seconds on
a 2-core development machine (machine speed 950-1,850: `python benchmarks/lean_trials.py --shapes 1x16@32 --repeats 1`).
CI's machines are not all that fast: on one ~3.4x slower (2026-12-02; the suite took 61 min against ~18) a TPE driver-kill
test ran past its 300 s mark, every step of it slower alike, nothing hung.  The fault tests already size their trials in
seconds from an epoch measured in the test process (fault_helpers.epoch_seconds): the same measure gives the slowdown,
and every limit is multiplied by it (never below 1: a faster machine keeps the limits as written).

AWNN_TEST_SLOWDOWN=<factor> sets it by hand (e.g. 1 to keep the limits as written, 4 on a machine known to be slow)."""
from __future__ import annotations

import os

# fault_helpers.epoch_seconds(GRID) on the machine the limits were set on: 16.6 ms on a 2-core AMD EPYC of machine
# speed ~1,700 (2026-12-02), where `make test` passes; the figure the suite's limits hold at with room to spare
REFERENCE_EPOCH_SECONDS = 0.0166
MAX_SLOWDOWN = 8.0  # (a measurement taken while the machine was swamped must not make a hung test wait for an hour)
ENV = "AWNN_TEST_SLOWDOWN"

_measured: list[float] = []


def _from_env() -> float | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 1.0 and value <= 100.0):
        raise ValueError(f"{ENV}={text!r}: expected a number from 1 to 100 (how many times slower this machine is than "
                         f"the one the suite's time limits were set on)")
    return value


def slowdown() -> float:
    """This machine's slowdown against the reference (>= 1), measured once per test process (~1.5 s) or read from
    AWNN_TEST_SLOWDOWN."""
    if not _measured:
        value = _from_env()
        if value is None:
            from fault_helpers import GRID, epoch_seconds

            value = min(MAX_SLOWDOWN, max(1.0, epoch_seconds(GRID) / REFERENCE_EPOCH_SECONDS))
        _measured.append(value)
    return _measured[0]


def limit(seconds: float) -> float:
    """`seconds`, a time limit set on the reference machine, for this machine."""
    return seconds * slowdown()
