"""No trial can start: the node's workers fail to load a trial's code before any trial actor is up.

A node whose Ray workers cannot import a trial's code (`ulimit -v` too low for pandas' libraries, a module missing)
reports each failure to the driver (search/_ray_speedups.py, `worker_import_failures`).  Where the worker then dies
with the trial's actor in it, Ray Tune sees a lost worker and search/sweep.py stops the comparison on it.  Where it
does not die, the actor's creation never ends: under `ulimit -v` the worker's exit aborts, and Ray's C++
failure-signal handler, which needs memory it cannot map, loops ("RAW: mmap error: 12", "SIGABRT received ... while
already in AbslFailureSignalHandler" in the worker's .err, the process alive until the node stops); Tune keeps the
trial PENDING and the driver waited without end (tests/search/test_node_limits.py's comparison, killed at 240 s, in
2 of 3 fresh-clone `make test` runs on 2026-12-07, and 1 of 3 runs under a busy-loop load by hand: a race).

`StartWatch`, a Ray Tune callback, keeps what the driver needs to tell that case: when a trial last started,
reported, ended or was retried, how many trials run, and which are pending.  search/sweep.py stops the comparison
(the environment fault, one line, resumable) once a node has reported an import failure, no trial runs, one is
pending, and nothing has happened for `NO_START_S` seconds since the later of the last event and the driver's first
sight of the failure.  It writes nothing and ends nothing itself.
"""
from __future__ import annotations

import time
from typing import Callable

from ray.tune import Callback

__all__ = ["NO_START_S", "StartWatch"]

NO_START_S = 30.0  # a trial's actor that has not started this long after its node reported import failures will not


class StartWatch(Callback):
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last_event = clock()
        self.running = 0
        self.pending: list[str] = []  # the writer keys (`<strategy>/<phase>/<key>`) of the trials Tune holds PENDING

    def _event(self, *args, **info) -> None:
        self.last_event = self.clock()

    on_trial_start = on_trial_result = on_trial_complete = on_trial_error = on_trial_recover = _event

    def on_step_end(self, iteration, trials, **info):
        from tracking.callback import TrialTracker

        self.running = sum(1 for t in trials if t.status == "RUNNING")
        # a fused trial by its first config, as the driver's other lines name it (sel-0020, not fuse-sel-0002)
        self.pending = [TrialTracker.members(t)[0][0] for t in trials
                        if t.status == "PENDING" and isinstance(t.config.get("spec"), dict) and TrialTracker.members(t)]

    def stuck(self, since: float, after: float = NO_START_S) -> str | None:
        """The first pending trial, where none runs and nothing has happened for `after` s since `since` (the driver's
        first sight of an import failure) or the last trial event, whichever is later; else None."""
        if self.running or not self.pending:
            return None
        if self.clock() - max(since, self.last_event) < after:
            return None
        return self.pending[0]
