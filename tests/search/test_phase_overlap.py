"""Overlapping phases (issue #30) without Ray: the phased searcher hands out
the next independent phase's trials while a phase's last trials run, and
never a phase before what it depends on (search/phase_plan.py).  A fake
trial loop plays Tune (tests/searcher_helpers.py, or a simulated clock
here); the sweep runs are fake hooks, or the real `SweepRuns` on MLflow
(SQLite) where the test is about what MLflow records."""
from __future__ import annotations

import heapq
import io
import time

import pytest

from search.budget import resolve_budget
from search.errors import TrialsNotRun
from search.phases import PhasedSearcher
from search.record import OutcomeRecord
from search.strategies import StrategyOptions, make_arms
from search.sweep_runs import SweepRuns
from search.tpe import TpeSource
from tracking.contract import Tag, client
from tracking.store import TrackingWriter, init_tracking

from searcher_helpers import FINISHED, Hooks, drive, trained_trials

WIDTHS = {1: [20], 2: [30]}  # awnn re-training run r learns this width (fixedplus re-trains at their mean, 25)


def score(spec: dict) -> dict:
    """Selection index 1 is the best; re-training run r of an awnn arm learns WIDTHS[r]."""
    i = spec["index"]
    out = {"key": spec["key"], "config": spec["config"], "index": i, "status": "ok", "error": None, "best_val_loss": 1.0,
           "device_hours": 0.001, "compute_seconds": 3.6, "gpu_hours": 0.0, "best_val_acc": 0.9 if i == 1 else 0.6}
    if spec["phase"] == "assessment":
        out.update(test_acc=0.8, widths=WIDTHS.get(i), widths_at_best=WIDTHS.get(i))
    return out


@pytest.fixture
def budget():
    return resolve_budget("smoke")


def make(families, budget, tmp_path, hooks=None, window=2, **options):
    arms = make_arms("doublemoon", families, StrategyOptions(**options), budget)
    record = OutcomeRecord()
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    searcher = PhasedSearcher(arms, budget, record, hooks or Hooks(), stream=io.StringIO(), trial_settings={},
                              make_tpe=lambda arm: TpeSource(arm, budget, storage, f"study-{arm.name}", window=window))
    return arms, record, searcher


def finish(record, spec: dict) -> None:
    """A trial ends as the tracking callback announces it."""
    key = f"{spec['strategy']}/{spec['phase']}/{spec['key']}"
    record.reported(key, {"best_val_acc": 0.5, "epoch": 1})
    record.finished(key, score(spec))


def take(searcher, n: int) -> list[dict]:
    """Ask for `n` trials (Tune filling free slots); stops at the first answer that is not a trial."""
    out = []
    for _ in range(n):
        answer = searcher.suggest(f"t{id(out)}-{len(out)}")
        if not isinstance(answer, dict):
            break
        out.append(answer["spec"])
    return out


def sweeps(specs: list[dict]) -> list[str]:
    """The sweeps of `specs`, in order, each once per run of consecutive trials."""
    out: list[str] = []
    for s in specs:
        sw = f"{s['strategy']}/{s['phase']}"
        if not out or out[-1] != sw:
            out.append(sw)
    return out


def test_the_next_arm_fills_a_phase_tail_and_an_earlier_phase_is_served_first(budget, tmp_path):
    arms, record, searcher = make(["fixed", "awnn"], budget, tmp_path)
    fixed, awnn = arms
    fixed_sel = take(searcher, fixed.trials)
    assert sweeps(fixed_sel) == ["fixed/selection"]
    # every fixed selection trial is in flight (none finished): a free slot gets the awnn arm's first trial, not nothing
    first_awnn = take(searcher, 1)
    assert sweeps(first_awnn) == ["awnn/selection"]
    assert searcher.hooks.calls == [("started", "fixed/selection", fixed.trials, None), ("started", "awnn/selection", awnn.trials, None)]
    for s in fixed_sel[:-1]:
        finish(record, s)
    assert ("ended", "fixed/selection", fixed.trials, None) not in searcher.hooks.calls  # its last trial still runs
    finish(record, fixed_sel[-1])
    # the callback's report of the last trial closes the sweep at once (its end time and wall time are right)
    assert searcher.hooks.calls[-1] == ("ended", "fixed/selection", fixed.trials, None)
    # the re-training of fixed (an earlier phase) is served before the rest of awnn's selection
    nxt = take(searcher, budget.runs(fixed.grid) + 1)
    assert sweeps(nxt) == ["fixed/assessment", "awnn/selection"]
    assert searcher.hooks.calls[-2:] == [("selected", "fixed", "sel-0001"), ("started", "fixed/assessment", 2, "sel-0001")]
    searcher.progress.min_interval = 0.0
    searcher.on_update("")  # the progress line: the earliest open phase, then the others
    line = searcher.stream.getvalue().splitlines()[-1]
    assert line.startswith("fixed assessment: 0/2 trials, 0 running, 2 pending") and "  also: awnn selection 0/6, 0 running, 2 pending" in line, line


def test_retraining_never_starts_before_its_own_selection_ends(budget, tmp_path):
    arms, record, searcher = make(["awnn"], budget, tmp_path)
    sel = take(searcher, 100)
    assert len(sel) == arms[0].trials and searcher.suggest("more") is None  # nothing independent to hand out: the slot waits
    for s in sel[:-1]:
        finish(record, s)
        assert searcher.suggest("more") is None
    finish(record, sel[-1])
    assert sweeps(take(searcher, 100)) == ["awnn/assessment"]


def test_fixedplus_waits_for_every_awnn_phase_while_an_independent_arm_runs(budget, tmp_path):
    arms, record, searcher = make(["awnn", "fixedplus", "fixed"], budget, tmp_path)
    awnn_sel = take(searcher, arms[0].trials)
    fixed_sel = take(searcher, 3)  # fixedplus has no selection; its re-training waits; fixed's selection is independent
    assert sweeps(fixed_sel) == ["fixed/selection"]
    for s in awnn_sel:
        finish(record, s)
    awnn_ass = take(searcher, 2)
    assert sweeps(awnn_ass) == ["awnn/assessment"]
    assert sweeps(take(searcher, 2)) == ["fixed/selection"]  # not fixedplus: awnn's re-training runs
    finish(record, awnn_ass[0])
    assert sweeps(take(searcher, 1)) == ["fixed/selection"]
    finish(record, awnn_ass[1])
    plus = take(searcher, 1)
    assert sweeps(plus) == ["fixedplus/assessment"]
    assert plus[0]["config"]["width"] == 25  # the mean of the widths awnn's re-training runs learned
    calls = [c[:2] for c in searcher.hooks.calls]
    assert calls.index(("ended", "awnn/assessment")) < calls.index(("started", "fixedplus/assessment"))


@pytest.mark.parametrize("concurrency", [2, 3])
def test_a_searcher_arm_sees_its_trials_in_its_own_order_when_overlapped(budget, tmp_path, concurrency):
    """tpe and asha arms overlap the arms before them; each hands out its trials in its own plan order,
    the tpe study is told every trial, and the asha arm's trials carry its rungs."""
    arms, record, searcher = make(["fixed", "tpe", "asha"], budget, tmp_path, seed=5)
    hooks = searcher.hooks
    suggested = drive(searcher, record, score, concurrency=concurrency)
    assert len(suggested) == searcher.max_trials()
    calls = [c[:2] for c in hooks.calls]
    assert calls.index(("started", "tpe/selection")) < calls.index(("ended", "fixed/selection"))  # the overlap happened
    tpe = [s for s in suggested if s["strategy"] == "tpe" and s["phase"] == "selection"]
    assert [s["key"] for s in tpe] == [f"sel-{i:04d}" for i in range(arms[1].trials)]
    told = trained_trials(searcher.tpe["tpe"].study)
    assert sorted(t.user_attrs["awnn_trial_key"] for t in told) == [s["key"] for s in tpe] and all(t.state.name == "COMPLETE" for t in told)
    asha = [s for s in suggested if s["strategy"] == "asha" and s["phase"] == "selection"]
    assert [s["key"] for s in asha] == [sp.key for sp in arms[2].selection_specs(budget)]  # the seeded launch order
    assert all(s["report_at"] == arms[2].asha_rungs(budget) for s in asha)
    assert [r.strategy for r in searcher.results] == ["fixed", "tpe", "asha"]


def test_slots_idle_only_when_every_phase_left_waits_for_a_running_one(budget, tmp_path):
    """A simulated clock, two slots, trials of uneven length: whenever the searcher leaves a slot
    empty, every phase not opened yet waits for an unfinished one (its arm's selection; fixedplus:
    awnn's phases); and the comparison ends sooner than phase after phase would (each phase's
    tail left a slot idle)."""
    arms, record, searcher = make(["fixed", "awnn", "random", "fixedplus"], budget, tmp_path, random_trials=5)
    slots, clock, running, n = 2, 0.0, [], 0
    lengths: dict[str, list[float]] = {}  # per sweep, its trials' lengths in launch order
    while True:
        answer = None
        while len(running) < slots:
            answer = searcher.suggest(f"t{n}")
            if not isinstance(answer, dict):
                break
            s = answer["spec"]
            length = 1.0 + (n * 7 % 5)  # uneven: each phase has a straggler
            lengths.setdefault(f"{s['strategy']}/{s['phase']}", []).append(length)
            heapq.heappush(running, (clock + length, n, s))
            n += 1
        if not running:
            assert answer == FINISHED
            break
        if len(running) < slots:  # a slot stays empty: what is left waits for a phase that has not ended
            assert not any(p.queue for p in searcher.plan)
            for p in searcher.plan:
                if p.state == "waiting":
                    waits_for = [searcher.plan.find(p.arm.name, "selection")] + (
                        [q for q in searcher.plan if q.arm.family == "awnn"] if p.arm.family == "fixedplus" else [])
                    assert any(q.state != "closed" for q in waits_for), p.sweep
        clock, i, s = heapq.heappop(running)
        finish(record, s)
        searcher.on_trial_complete(f"t{i}")
    searcher.finish_all()
    assert searcher.plan.all_closed() and sum(map(len, lengths.values())) == searcher.max_trials()
    sequential = 0.0  # phase after phase, each alone on the slots, its trials in the same order
    for trials in lengths.values():
        ends = [0.0] * slots
        for length in trials:
            ends[ends.index(min(ends))] += length
        sequential += max(ends)
    assert clock < sequential, (clock, sequential)


def test_tune_ending_early_names_every_open_phase_with_trials_not_run(budget, tmp_path):
    arms, record, searcher = make(["fixed", "awnn"], budget, tmp_path)
    specs = take(searcher, arms[0].trials + 2)  # fixed's selection and two of awnn's in flight
    for s in specs[: arms[0].trials - 1]:
        finish(record, s)
    with pytest.raises(TrialsNotRun, match=r"Ray Tune ended before 1 trial\(s\) of fixed/selection ran \(sel-0029\), "
                                           r"6 of awnn/selection \(sel-0000, .* and 1 more\); .*--resume"):
        searcher.finish_all()
    assert [c[:2] for c in searcher.hooks.calls] == [("started", "fixed/selection"), ("started", "awnn/selection")]


def _sweep_runs_on_mlflow(tmp_path, budget, cls=SweepRuns):
    """A real SweepRuns (`cls`) writing a comparison `c1` to MLflow on SQLite through a real TrackingWriter."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    runs = cls(writer, "doublemoon", budget, lambda line: None)
    runs.comparison = "c1"
    writer.start_run("cmp", "compare-c1", tags={Tag.KIND: "comparison", Tag.COMPARISON: "c1"})
    return uri, writer, runs


def _sweeps_written(uri, writer) -> dict:
    """The sweep runs in MLflow once the writer has flushed (it is closed), by key."""
    assert writer.flush(timeout=30)
    found = {r.data.tags[Tag.KEY]: r for r in client(uri).search_runs([writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'sweep'")}
    writer.close(timeout=30)
    return found


def test_overlapping_sweep_runs_in_mlflow_open_close_and_stop_together(budget, tmp_path):
    """The real SweepRuns on MLflow (SQLite): overlapping sweeps are open at once, each closes
    FINISHED when its last trial ends, an arm's re-training opens after its selection closed; a
    driver stopped with two sweeps open records both sweeps' wall time and closes both KILLED."""
    uri, writer, runs = _sweep_runs_on_mlflow(tmp_path, budget, SweepRuns)
    arms, record, searcher = make(["awnn", "fixed"], budget, tmp_path, hooks=runs)
    sel = take(searcher, arms[0].trials)
    time.sleep(0.05)
    assert sweeps(take(searcher, 2)) == ["fixed/selection"]  # awnn's selection in its tail: fixed's starts
    time.sleep(0.05)
    for s in sel:
        finish(record, s)
    time.sleep(0.05)
    assert sweeps(take(searcher, 2)) == ["awnn/assessment"]
    time.sleep(0.1)
    # stopped (Ctrl-C) with two sweeps open, as search/sweep.py's _close_open does
    assert set(searcher.open_walls()) == {"awnn/assessment", "fixed/selection"}
    runs.close_open("interrupted", "KILLED", searcher.open_walls())
    found = _sweeps_written(uri, writer)
    assert set(found) == {"awnn/selection", "awnn/assessment", "fixed/selection"}
    a_sel, a_ass, f_sel = found["awnn/selection"], found["awnn/assessment"], found["fixed/selection"]
    assert (a_sel.info.status, a_sel.data.tags[Tag.STATE], a_sel.data.metrics["n_trials"]) == ("FINISHED", "finished", arms[0].trials)
    assert (a_ass.info.status, a_ass.data.tags[Tag.STATE]) == ("KILLED", "interrupted")
    assert (f_sel.info.status, f_sel.data.tags[Tag.STATE]) == ("KILLED", "interrupted")
    assert f_sel.info.start_time < a_sel.info.end_time <= a_ass.info.start_time  # overlap; re-training after its selection
    # fixed's sweep was not the one in progress (awnn's re-training leads): its wall time is recorded all the same
    assert f_sel.data.metrics["wall_seconds"] >= 0.15
    assert a_ass.data.metrics["wall_seconds"] >= 0.05


class _InterruptedAsItStarts(SweepRuns):
    """The real SweepRuns; a Ctrl-C lands just after `sweep`'s run was started, while the searcher queues its trials."""

    sweep = "awnn/selection"

    def sweep_started(self, arm, phase, specs, selected):
        super().sweep_started(arm, phase, specs, selected)
        if f"{arm.name}/{phase}" == self.sweep:
            time.sleep(0.05)
            raise KeyboardInterrupt


def test_a_sweep_stopped_as_it_starts_closes_with_its_wall_time(budget, tmp_path):
    """The long fault matrix: a SIGTERM between a sweep's start in MLflow and its phase counted open left the sweep
    KILLED with no wall time (the searcher knew it only once its trials were queued)."""
    uri, writer, runs = _sweep_runs_on_mlflow(tmp_path, budget, _InterruptedAsItStarts)
    arms, record, searcher = make(["fixed", "awnn"], budget, tmp_path, hooks=runs)
    with pytest.raises(KeyboardInterrupt):
        take(searcher, arms[0].trials + 1)  # fixed's selection, then awnn's starts in its tail
    assert set(searcher.open_walls()) == {"fixed/selection"}  # awnn's phase: not open yet
    runs.close_open("interrupted", "KILLED", searcher.open_walls())
    found = _sweeps_written(uri, writer)
    assert set(found) == {"fixed/selection", "awnn/selection"}
    for run in found.values():
        assert (run.info.status, run.data.tags[Tag.STATE]) == ("KILLED", "interrupted")
    assert found["awnn/selection"].data.metrics.get("wall_seconds", 0.0) >= 0.05
    assert found["fixed/selection"].data.metrics["wall_seconds"] >= found["awnn/selection"].data.metrics["wall_seconds"]
