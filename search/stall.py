"""A trial that has gone quiet: one warning line naming it, and one when it reports again.

A trial that neither reports nor ends - its data read blocked on a network
mount that stopped answering, its process stopped (SIGSTOP, a debugger) or
deadlocked, a device that no longer answers - left the driver waiting without
end and without a word: the progress line is only redrawn on a report.

`StallWatch`, a Ray Tune callback, notes when each running Ray trial started
and when it last reported; at every step of Tune's loop (several a second) it
warns once about each trial silent for longer than its limit:

    max(--stall-warning, 10 x the longest gap between its reports so far)
    + --report-interval

(before its first report only the flag and the interval count: that report
waits for the data, the model and a whole epoch; the interval is added
because a trial reports no sooner than that - `--report-interval 900` would
otherwise have every trial called quiet before its first report).  The driver keeps waiting - a slow trial
is not a hung one, and only the user knows which - and says how to stop and
resume.  When the trial reports again, one line says so.  A retry starts the
count afresh.  `--stall-warning 0` turns the watch off.

What it reads is Tune's own events (start, result, recover, end) and each
report's `pid`, `node_ip` and `hostname` (search/trial_common.py); it writes
nothing but the driver's log, and nothing reads its state.
"""
from __future__ import annotations

import time
from typing import Callable

from ray.tune import Callback

from .progress import fmt_seconds

__all__ = ["StallWatch", "GAP_FACTOR"]

GAP_FACTOR = 10.0  # a trial whose reports came every g seconds is not called quiet before GAP_FACTOR * g


class _Watched:
    __slots__ = ("since", "last", "gap", "reports", "where", "warned")

    def __init__(self, now: float):
        self.since = now  # the attempt's start
        self.last = now  # its last report (or its start)
        self.gap = 0.0  # the longest time between two of its reports
        self.reports = 0
        self.where = ""  # "pid N on HOST (IP)" from its last report
        self.warned = 0.0  # when it was last called quiet (0: not since its last report)


class StallWatch(Callback):
    """Warns (through `warn`, the driver's log) about a running trial silent for
    longer than `max(after, GAP_FACTOR x its longest gap between reports) +
    report_interval`; `after <= 0`: never.  `clock`: seconds, monotonic (tests
    give their own)."""

    def __init__(self, warn: Callable[[str], None], after: float, report_interval: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        self.warn = warn
        self.after = float(after)
        self.report_interval = max(0.0, float(report_interval))
        self.clock = clock
        self.running: dict[str, _Watched] = {}

    def __getstate__(self):
        # Ray pickles the Tuner's callbacks into its experiment state: the live hooks stay behind
        state = self.__dict__.copy()
        state["warn"] = None
        state["clock"] = time.monotonic
        state["running"] = {}
        return state

    @staticmethod
    def name(trial) -> str:
        """The trial as the driver's lines name it: `<arm>/<phase>/<trial key>` (a fused group: its group key, and its size)."""
        spec = (getattr(trial, "config", None) or {}).get("spec") or {}
        if not spec:
            return str(trial)
        key = f"{spec.get('strategy')}/{spec.get('phase')}/{spec.get('key')}"
        members = spec.get("members") or ()
        return f"{key} (a fused group of {len(members) - len(spec.get('done') or ())} configs)" if members else key

    def limit(self, w: _Watched) -> float:
        return (max(self.after, GAP_FACTOR * w.gap) if w.reports >= 2 else self.after) + self.report_interval

    # ------------------------------------------------------------ Tune's events
    def on_trial_start(self, iteration, trials, trial, **info):
        self.running[trial.trial_id] = _Watched(self.clock())

    def on_trial_result(self, iteration, trials, trial, result, **info):
        w = self.running.get(trial.trial_id)
        if w is None:  # (a result of a trial whose start this watch did not see: a restored Tuner)
            w = self.running[trial.trial_id] = _Watched(self.clock())
        now = self.clock()
        if w.reports:
            w.gap = max(w.gap, now - w.last)
        if w.warned and self.warn is not None:
            self.warn(f"trial {self.name(trial)} reported again after {fmt_seconds(now - w.last)} of silence")
        w.last, w.warned, w.reports = now, 0.0, w.reports + 1
        pid, host, ip = result.get("pid"), result.get("hostname"), result.get("node_ip")
        if pid:
            w.where = f"pid {pid}" + (f" on {host}" if host else "") + (f" ({ip})" if ip and ip != host else "")

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)  # its retry starts afresh (on_trial_start)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)

    def on_step_end(self, iteration, trials, **info):
        self.check(trials)

    # ------------------------------------------------------------ the check
    def check(self, trials) -> list[str]:
        """Warn about each running trial quiet past its limit (once per silence); return what was said."""
        if self.after <= 0 or self.warn is None or not self.running:
            return []
        said = []
        now = self.clock()
        by_id = {t.trial_id: t for t in trials}
        for trial_id, w in list(self.running.items()):
            trial = by_id.get(trial_id)
            if trial is None or w.warned or now - w.last < self.limit(w):
                continue
            w.warned = now
            silent = fmt_seconds(now - w.last)
            pace = (f"its reports came every {fmt_seconds(w.gap)} or less" if w.reports >= 2
                    else "its first report came after " + fmt_seconds(w.last - w.since) if w.reports
                    else "no report yet since it started")
            where = f"; {w.where}" if w.where else ""
            text = (f"warning: trial {self.name(trial)} has reported nothing for {silent} ({pace}{where})\n"
                    "  it may be hung: a read of its data blocked (a network mount), its process stopped or deadlocked, its device\n"
                    "  not answering; the sweep waits for it.  To stop: Ctrl-C, then the same command with --resume (the trial\n"
                    "  starts again from its last checkpoint).  --stall-warning sets when this is said")
            self.warn(text)
            said.append(text)
        return said
