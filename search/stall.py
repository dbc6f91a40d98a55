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

`--stall-timeout S` (0: never, the default) goes one step further, for
sweeps nobody watches: a running trial silent past the same limit with S in
place of the flag has its worker ended, which Ray Tune sees as a lost
worker and retries from the trial's last checkpoint (`--max-failures`; past
it the comparison stops, resumable, as for any lost worker).  How: `ray.kill`
of the trial's Ray actor, whose handle Tune keeps (a private read, in
search/_ray_speedups.py: the actor is marked dead at once, even when its
process is stuck in an uninterruptible read, and a trial that has not
reported yet is ended too); with the speed-ups off or on an untested Ray,
SIGKILL to the process its last report named, on its node (a Ray task
pinned there when it is not the driver's), only if it is still a Ray worker
(its command line starts with `ray::`: a pid reused since is left alone); a
trial that has not reported is then named, not ended.

What it reads is Tune's own events (start, result, recover, end) and each
report's `pid`, `node_id`, `node_ip` and `hostname` (search/trial_common.py);
it writes nothing but the driver's log (and, with --stall-timeout, ends a
process), and nothing reads its state.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable

from ray.tune import Callback

from tracking.hooks import past_tune

from .progress import fmt_seconds

__all__ = ["StallWatch", "GAP_FACTOR", "end_trial", "end_worker", "end_ray_worker"]

GAP_FACTOR = 10.0  # a trial whose reports came every g seconds is not called quiet before GAP_FACTOR * g


class _Watched:
    __slots__ = ("since", "last", "gap", "reports", "where", "warned", "process", "ended")

    def __init__(self, now: float):
        self.since = now  # the attempt's start
        self.last = now  # its last report (or its start)
        self.gap = 0.0  # the longest time between two of its reports
        self.reports = 0
        self.where = ""  # "pid N on HOST (IP)" from its last report
        self.warned = 0.0  # when it was last called quiet (0: not since its last report)
        self.process: dict = {}  # pid, node_id, hostname of its worker, from its last report
        self.ended = False  # its process was ended (or found unknown) past --stall-timeout, this attempt


def end_ray_worker(pid: int) -> str | None:
    """SIGKILL `pid` on this machine if it is still a Ray worker (its command
    line starts with `ray::`, the title Ray gives its workers); None when it
    was ended, else why not."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            title = f.read()
    except OSError:
        return f"pid {pid} no longer runs"
    if not title.startswith(b"ray::"):
        return f"pid {pid} is no longer a Ray worker"
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as e:
        return f"pid {pid} could not be ended ({e.strerror})"
    return None


def end_trial(trial, process: dict, said: Callable[[str], None]) -> str | None:
    """End the worker of `trial`: its Ray actor with `ray.kill` where Tune's
    handle to it can be read (search/_ray_speedups.trial_actor: the actor is
    marked dead at once, even one whose process is stuck in an uninterruptible
    read, and one that has not reported yet), else the process its last report
    named (end_worker).  None when it was ended or asked to end, else why not."""
    from ._ray_speedups import trial_actor

    actor = trial_actor(trial)
    failed = ""
    if actor is not None:
        import ray

        try:
            ray.kill(actor, no_restart=True)
            return None
        except Exception as e:  # noqa: BLE001 - then by its pid, if known
            failed = f"ray.kill: {type(e).__name__}; "
    if not process.get("pid"):
        return f"{failed}its process is not known: it has not reported yet"
    return end_worker(process, said)


def end_worker(process: dict, said: Callable[[str], None]) -> str | None:
    """End the trial worker `process` (its report's pid and node_id): here when
    it runs on the driver's Ray node, else by a Ray task pinned to its node (the
    answer then comes later, through `said`, if it is a failure).  None when it
    was ended or asked to end, else why not."""
    import ray

    pid, node = int(process["pid"]), process.get("node_id")
    if not node or node == ray.get_runtime_context().get_node_id():
        return end_ray_worker(pid)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        ref = ray.remote(num_cpus=0, max_retries=0)(end_ray_worker).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(pid)
    except Exception as e:  # noqa: BLE001 - a node gone: said, the sweep goes on waiting
        return f"no task could be sent to its node ({type(e).__name__})"

    def answer():
        try:
            why = ray.get(ref, timeout=120)
        except Exception as e:  # noqa: BLE001
            why = f"the task on its node did not answer ({type(e).__name__})"
        if why:
            said(f"warning: the trial's process was not ended: {why}")
    threading.Thread(target=answer, name="awnn-end-worker", daemon=True).start()
    return None


class StallWatch(Callback):
    """Warns (through `warn`, the driver's log) about a running trial silent for
    longer than `max(after, GAP_FACTOR x its longest gap between reports) +
    report_interval`; `after <= 0`: never.  With `end_after > 0`, a trial
    silent past that limit with `end_after` in place of `after` has its worker
    process ended by `end(trial, process, warn)` (default end_trial; returns
    None, or why not), and `on_end(trial id, why)` told.
    `clock`: seconds, monotonic (tests give their own)."""

    def __init__(self, warn: Callable[[str], None], after: float, report_interval: float = 0.0,
                 clock: Callable[[], float] = time.monotonic, end_after: float = 0.0,
                 end: Callable[[object, dict, Callable[[str], None]], str | None] | None = None,
                 on_end: Callable[[str, str], None] | None = None):
        self.warn = warn
        self.after = float(after)
        self.report_interval = max(0.0, float(report_interval))
        self.clock = clock
        self.end_after = float(end_after)
        self.end = end or end_trial
        self.on_end = on_end  # (Ray trial id, why) once a trial's worker was ended: the tracking callback records why
        self.running: dict[str, _Watched] = {}

    def __getstate__(self):
        # Ray pickles the Tuner's callbacks into its experiment state: the live hooks stay behind
        state = self.__dict__.copy()
        state["warn"] = None
        state["clock"] = time.monotonic
        state["end"] = None
        state["on_end"] = None
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

    def limit(self, w: _Watched, base: float | None = None) -> float:
        base = self.after if base is None else base
        return (max(base, GAP_FACTOR * w.gap) if w.reports >= 2 else base) + self.report_interval

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
        w.last, w.warned, w.ended, w.reports = now, 0.0, False, w.reports + 1
        pid, host, ip = result.get("pid"), result.get("hostname"), result.get("node_ip")
        if pid:
            w.where = f"pid {pid}" + (f" on {host}" if host else "") + (f" ({ip})" if ip and ip != host else "")
            w.process = {"pid": pid, "node_id": result.get("node_id"), "hostname": host}

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)  # its retry starts afresh (on_trial_start)

    @past_tune  # (Tune would swallow its error: tracking/hooks.py)
    def on_trial_complete(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)

    def on_step_end(self, iteration, trials, **info):
        self.check(trials)

    # ------------------------------------------------------------ the check
    def check(self, trials) -> list[str]:
        """Warn about each running trial quiet past its limit (once per silence), end
        those past --stall-timeout's (once per attempt); return what was said."""
        if (self.after <= 0 and self.end_after <= 0) or self.warn is None or not self.running:
            return []
        said = []
        now = self.clock()
        by_id = {t.trial_id: t for t in trials}
        for trial_id, w in list(self.running.items()):
            trial = by_id.get(trial_id)
            if trial is None:
                continue
            if self.end_after > 0 and not w.ended and now - w.last >= self.limit(w, self.end_after):
                said.append(self._end(trial, w, now))
            if self.after <= 0 or w.warned or now - w.last < self.limit(w):
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

    def _end(self, trial, w: _Watched, now: float) -> str:
        """End the worker of `trial`, silent past --stall-timeout's limit; say what was done."""
        w.ended = True
        w.warned = w.warned or now  # (the line below says it all: no second warning for this silence)
        silent = fmt_seconds(now - w.last)
        name = self.name(trial)
        try:
            warn = self.warn
            why = self.end(trial, w.process, lambda text: warn(f"{text} (trial {name})"))  # (an answer that comes later)
        except Exception as e:  # noqa: BLE001 - the sweep goes on waiting; said
            why = f"{type(e).__name__}: {e}"
        if why is None:
            if self.on_end is not None:
                self.on_end(trial.trial_id, f"ended by --stall-timeout {fmt_seconds(self.end_after)} after {silent} without a report")
            what = f"its process ({w.where})" if w.where else "its Ray actor"
            text = (f"warning: trial {name} has reported nothing for {silent}, past --stall-timeout {fmt_seconds(self.end_after)}:\n"
                    f"  {what} was ended; Ray Tune retries it from its last checkpoint (--max-failures)")
        else:
            text = (f"warning: trial {name} has reported nothing for {silent}, past --stall-timeout {fmt_seconds(self.end_after)},\n"
                    f"  but it was not ended ({why}); the sweep waits for it.  To stop: Ctrl-C, then the same command with --resume")
        self.warn(text)
        return text
