"""search/start_watch.py: when no trial can start (the workers of a node that reported import failures die before
Ray hands them a trial), from Tune's own events and trial states; the real case: tests/search/test_node_limits.py."""
from __future__ import annotations

from types import SimpleNamespace

from search.start_watch import NO_START_S, StartWatch


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def trial(status: str, key: str, strategy: str = "fixed", phase: str = "selection", members: tuple[str, ...] = ()):
    spec = {"strategy": strategy, "phase": phase, "key": key}
    if members:
        spec["members"] = [{"strategy": strategy, "phase": phase, "key": m} for m in members]
    return SimpleNamespace(status=status, config={"spec": spec})


def test_a_pending_trial_with_nothing_running_and_no_event_is_named_after_the_wait():
    clock = Clock()
    watch = StartWatch(clock)
    seen = clock.now  # the driver first sees a node's import failure
    watch.on_step_end(1, [trial("PENDING", "sel-0020"), trial("PENDING", "sel-0021")])
    clock.now += NO_START_S - 1
    assert watch.stuck(seen) is None  # not yet
    clock.now += 2
    assert watch.stuck(seen) == "fixed/selection/sel-0020"


def test_any_trial_event_or_running_trial_or_no_pending_one_is_not_stuck():
    clock = Clock()
    watch = StartWatch(clock)
    seen = clock.now
    watch.on_step_end(1, [trial("PENDING", "sel-0001")])
    clock.now += NO_START_S - 5
    watch.on_trial_result(1, [], trial("RUNNING", "sel-0000"), {})  # something happened: the wait counts from here
    clock.now += 10
    assert watch.stuck(seen) is None
    clock.now += NO_START_S
    assert watch.stuck(seen) == "fixed/selection/sel-0001"
    watch.on_step_end(2, [trial("RUNNING", "sel-0000"), trial("PENDING", "sel-0001")])
    assert watch.stuck(seen) is None  # a trial runs: the node can start them (a slot may simply be busy)
    watch.on_step_end(3, [trial("TERMINATED", "sel-0000"), trial("TERMINATED", "sel-0001")])
    assert watch.stuck(seen) is None  # none pending


def test_the_wait_counts_from_the_first_sight_of_the_failure_when_that_is_later():
    clock = Clock()
    watch = StartWatch(clock)
    watch.on_step_end(1, [trial("PENDING", "ass-01", "awnn", "assessment")])
    clock.now += 10 * NO_START_S  # a long quiet wait for a slot, then a node reports a failure
    seen = clock.now
    assert watch.stuck(seen) is None
    clock.now += NO_START_S
    assert watch.stuck(seen) == "awnn/assessment/ass-01"


def test_every_tune_event_counts():
    for event in ("on_trial_start", "on_trial_result", "on_trial_complete", "on_trial_error", "on_trial_recover"):
        clock = Clock()
        watch = StartWatch(clock)
        watch.on_step_end(1, [trial("PENDING", "sel-0000")])
        clock.now += 2 * NO_START_S
        getattr(watch, event)(1, [], trial("RUNNING", "sel-0001"), **({"result": {}} if event == "on_trial_result" else {}))
        assert watch.stuck(0.0) is None, event


def test_a_fused_trial_is_named_by_its_first_config_as_the_other_lines_name_it():
    clock = Clock()
    watch = StartWatch(clock)
    watch.on_step_end(1, [trial("PENDING", "fuse-sel-0002", members=("sel-0020", "sel-0021"))])
    clock.now += NO_START_S
    assert watch.stuck(0.0) == "fixed/selection/sel-0020"
