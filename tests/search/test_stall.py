"""search/stall.py: when a running trial is called quiet, and what is said.

Driven through Ray Tune's callback hooks with a clock the test moves: the
system test (tests/system/test_fault_stalled_trial.py) stops a real trial's
process."""
from __future__ import annotations

import os
import pickle
import signal
import time

from search.stall import GAP_FACTOR, StallWatch


class Trial:  # what the watch reads of a ray.tune Trial: its id and its config's spec
    def __init__(self, trial_id: str, key: str = "sel-0001", members: int = 0, done: int = 0):
        self.trial_id = trial_id
        spec = {"strategy": "awnn", "phase": "selection", "key": key}
        if members:
            spec.update(members=[{"key": f"m{i}"} for i in range(members)], done=[f"m{i}" for i in range(done)])
        self.config = {"spec": spec}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _watch(after: float = 60.0, report_interval: float = 0.0):
    said, clock = [], Clock()
    return StallWatch(said.append, after, report_interval, clock=clock), said, clock


def test_a_trial_silent_past_the_flag_is_named_once_with_its_process_and_again_when_it_reports():
    w, said, clock = _watch(60)
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    clock.now += 59
    w.on_step_end(0, [t])
    assert said == []  # before its first report only the flag counts, not yet reached
    w.on_trial_result(0, [t], t, {"pid": 4242, "hostname": "node-3", "node_ip": "10.0.0.3"})
    clock.now += 60
    w.on_step_end(0, [t])
    assert len(said) == 1
    line = said[0]
    first, *rest = line.splitlines()
    assert first == "warning: trial awnn/selection/sel-0001 has reported nothing for 1m00s (its first report came after 59s; pid 4242 on node-3 (10.0.0.3))", first
    assert all(r.startswith("  ") and len(r) <= 120 for r in rest), rest  # the advice: indented, lines a terminal shows whole
    advice = " ".join(rest)
    assert "may be hung" in advice and "Ctrl-C" in advice and "--resume" in advice and "--stall-warning" in advice, advice
    clock.now += 600
    w.on_step_end(0, [t])
    assert len(said) == 1  # once per silence
    w.on_trial_result(0, [t], t, {"pid": 4242})
    assert said[1] == "trial awnn/selection/sel-0001 reported again after 11m00s of silence", said


def test_the_limit_grows_with_the_longest_gap_between_its_reports():
    w, said, clock = _watch(5)
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    for gap in (1, 30, 2):  # a slow epoch: reports 30 s apart are its pace, not a hang
        clock.now += gap
        w.on_trial_result(0, [t], t, {})
    clock.now += GAP_FACTOR * 30 - 1
    w.on_step_end(0, [t])
    assert said == []
    clock.now += 1
    w.on_step_end(0, [t])
    assert len(said) == 1 and "has reported nothing for 5m00s (its reports came every 30s or less)" in said[0], said


def test_a_trial_that_never_reported_is_named_after_the_flag_and_ended_or_retried_trials_are_not():
    w, said, clock = _watch(10)
    quiet, ended, retried, erred = Trial("q", "sel-0002"), Trial("e"), Trial("r"), Trial("x")
    trials = [quiet, ended, retried, erred]
    for t in trials:
        w.on_trial_start(0, trials, t)
    w.on_trial_complete(0, trials, ended)
    w.on_trial_recover(0, trials, retried)
    w.on_trial_error(0, trials, erred)
    clock.now += 10
    w.on_step_end(0, trials)
    assert len(said) == 1 and "trial awnn/selection/sel-0002 has reported nothing for 10s (no report yet since it started)" in said[0], said
    # the retry starts its count afresh
    w.on_trial_start(0, trials, retried)
    clock.now += 9
    w.on_step_end(0, trials)
    assert len(said) == 1


def test_a_fused_group_is_named_with_the_configs_it_still_trains():
    w, said, clock = _watch(1)
    g = Trial("g", "fuse-sel-0000", members=6, done=2)
    w.on_trial_start(0, [g], g)
    clock.now += 2
    w.on_step_end(0, [g])
    assert "trial awnn/selection/fuse-sel-0000 (a fused group of 4 configs) has reported nothing for 2s" in said[0], said


def test_zero_turns_it_off_and_the_watch_pickles_without_its_hooks():
    w, said, clock = _watch(0)
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    clock.now += 10 ** 6
    w.on_step_end(0, [t])
    assert said == []
    # Ray Tune pickles its callbacks into the experiment state: the driver's log and the clock stay behind
    w2, _, _ = _watch(5)
    w2.on_trial_start(0, [t], t)
    back = pickle.loads(pickle.dumps(w2))
    assert back.warn is None and back.running == {} and back.after == 5
    back.on_step_end(0, [t])  # (no hook: says nothing, raises nothing)


def test_the_report_interval_is_added_so_a_trial_that_reports_rarely_is_not_called_quiet_before_its_first_report():
    w, said, clock = _watch(600, report_interval=900)  # `--report-interval 900`: a report every 15 minutes at most
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    clock.now += 1499
    w.on_step_end(0, [t])
    assert said == []
    clock.now += 1
    w.on_step_end(0, [t])
    assert len(said) == 1 and "has reported nothing for 25m00s" in said[0], said


def _ending_watch(after: float, end_after: float, answer=None):
    said, clock, ended = [], Clock(), []

    def end(trial, process, say):
        if not process.get("pid"):  # (what end_trial says without Tune's actor handle)
            return "its process is not known: it has not reported yet"
        ended.append(dict(process))
        return answer
    return StallWatch(said.append, after, 0.0, clock=clock, end_after=end_after, end=end), said, clock, ended


def test_stall_timeout_ends_a_silent_trials_process_once_per_attempt_after_the_warning():
    w, said, clock, ended = _ending_watch(after=60, end_after=300)
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    clock.now += 5
    w.on_trial_result(0, [t], t, {"pid": 4242, "node_id": "n3", "hostname": "node-3", "node_ip": "10.0.0.3"})
    clock.now += 60
    w.on_step_end(0, [t])
    assert len(said) == 1 and said[0].startswith("warning: trial awnn/selection/sel-0001 has reported nothing for 1m00s") and ended == []
    clock.now += 239
    w.on_step_end(0, [t])
    assert ended == []  # not before --stall-timeout
    clock.now += 1
    w.on_step_end(0, [t])
    assert ended == [{"pid": 4242, "node_id": "n3", "hostname": "node-3"}]
    assert said[1] == ("warning: trial awnn/selection/sel-0001 has reported nothing for 5m00s, past --stall-timeout 5m00s:\n"
                       "  its process (pid 4242 on node-3 (10.0.0.3)) was ended; Ray Tune retries it from its last checkpoint (--max-failures)"), said
    clock.now += 1000
    w.on_step_end(0, [t])
    assert len(ended) == 1 and len(said) == 2  # once per attempt
    w.on_trial_recover(0, [t], t)  # Ray Tune's retry: a new attempt, a new count
    w.on_trial_start(0, [t], t)
    clock.now += 299
    w.on_step_end(0, [t])
    assert len(ended) == 1


def test_stall_timeout_alone_ends_without_a_warning_first_and_the_gap_allowance_holds():
    w, said, clock, ended = _ending_watch(after=0, end_after=10)  # --stall-warning 0 --stall-timeout 10
    t = Trial("a")
    w.on_trial_start(0, [t], t)
    for gap in (1, 30):  # reports 30 s apart: 10x that is its allowance
        clock.now += gap
        w.on_trial_result(0, [t], t, {"pid": 7, "node_id": "n1"})
    clock.now += GAP_FACTOR * 30 - 1
    w.on_step_end(0, [t])
    assert ended == [] and said == []
    clock.now += 1
    w.on_step_end(0, [t])
    assert len(ended) == 1 and len(said) == 1 and "past --stall-timeout 10s:\n  its process (pid 7) was ended" in said[0], said


def test_a_trial_whose_process_is_unknown_or_cannot_be_ended_is_named_and_waited_for():
    w, said, clock, ended = _ending_watch(after=0, end_after=10, answer="pid 7 is no longer a Ray worker")
    silent, gone = Trial("s", "sel-0002"), Trial("g", "sel-0003")
    trials = [silent, gone]
    for t in trials:
        w.on_trial_start(0, trials, t)
    w.on_trial_result(0, trials, gone, {"pid": 7, "node_id": "n1"})
    clock.now += 10
    w.on_step_end(0, trials)
    assert len(ended) == 1  # only the one whose process is known was tried
    assert any("sel-0002 has reported nothing for 10s, past --stall-timeout 10s,\n  but it was not ended (its process is not known: "
               "it has not reported yet); the sweep waits for it" in line for line in said), said
    assert any("sel-0003" in line and "not ended (pid 7 is no longer a Ray worker)" in line for line in said), said
    w.on_trial_result(0, trials, silent, {"pid": 9, "node_id": "n1"})  # it reports after all, then goes silent again
    assert said[-1] == "trial awnn/selection/sel-0002 reported again after 10s of silence"
    clock.now += 10
    w.on_step_end(0, trials)
    assert ended[-1]["pid"] == 9


def test_end_ray_worker_ends_only_a_ray_worker():
    import subprocess
    import sys

    from search.stall import end_ray_worker

    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert end_ray_worker(plain.pid) == f"pid {plain.pid} is no longer a Ray worker"
        assert plain.poll() is None  # left alone
    finally:
        plain.kill()
        plain.wait()
    assert end_ray_worker(plain.pid) == f"pid {plain.pid} no longer runs"
    # a process titled as Ray titles its workers (argv[0] "ray::ImplicitFunc.train"): ended, even while stopped
    titled = subprocess.Popen(["bash", "-c", 'exec -a "ray::ImplicitFunc.train" sleep 60'])
    try:
        for _ in range(100):
            with open(f"/proc/{titled.pid}/cmdline", "rb") as f:
                if f.read().startswith(b"ray::"):
                    break
            time.sleep(0.05)
        os.kill(titled.pid, signal.SIGSTOP)
        assert end_ray_worker(titled.pid) is None
        assert titled.wait(timeout=10) == -signal.SIGKILL
    finally:
        if titled.poll() is None:
            titled.kill()
            titled.wait()
