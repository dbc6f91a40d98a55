"""The phased searcher and the outcome record without Ray: a fake trial loop
plays Tune (asks `suggest`, finishes trials in launch order, fills the
record as the tracking callback would), and fake hooks stand in for the
MLflow sweep runs (search/sweep_runs.py)."""
from __future__ import annotations

import io
import math
import re
import statistics

import pytest

from search.budget import resolve_budget
from search.errors import TrialsNotRun
from search.phases import PhasedSearcher
from search.protocol import select_best
from search.record import OutcomeRecord
from search.resume import PriorAttempts, Rerun
from search.strategies import StrategyOptions, make_arms
from search.tpe import TpeSource

from searcher_helpers import FINISHED, Hooks, trained_trials
from searcher_helpers import drive as play


def score(spec: dict) -> dict:
    """A trial's outcome: selection index 4 is the best usable one, index 2
    diverges with a higher score (never selected); re-training run r scores
    test_acc 0.8 + 0.01 r."""
    i = spec["index"]
    out = {"key": spec["key"], "config": spec["config"], "index": i, "status": "ok", "error": None,
           "best_val_loss": 1.0, "device_hours": 0.001, "compute_seconds": 3.6, "gpu_hours": 0.0}
    if spec["phase"] == "assessment":
        return {**out, "best_val_acc": 0.9, "test_acc": 0.8 + 0.01 * i}
    if i == 2:
        return {**out, "status": "diverged", "best_val_acc": 0.99}
    return {**out, "best_val_acc": 0.9 if i == 4 else 0.6}


def drive(searcher, record, outcome=score, **kw):
    return play(searcher, record, outcome, **kw)


@pytest.fixture
def budget():
    return resolve_budget("smoke")


def make(families, budget, tmp_path, prior=None, window=3, **options):
    arms = make_arms("doublemoon", families, StrategyOptions(**options), budget)
    record = OutcomeRecord(earlier=(prior or PriorAttempts()).finished)
    hooks = Hooks()
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    searcher = PhasedSearcher(arms, budget, record, hooks, prior=prior, stream=io.StringIO(), trial_settings={"x": 1},
                              make_tpe=lambda arm: TpeSource(arm, budget, storage, f"study-{arm.name}", window=window))
    return arms, record, hooks, searcher


@pytest.mark.parametrize("order", ["oldest", "newest"])
def test_phases_run_in_order_and_assess_the_selected_config(budget, tmp_path, order):
    arms, record, hooks, searcher = make(["fixed", "awnn", "random", "asha"], budget, tmp_path)
    suggested = drive(searcher, record, order=order)
    assert len(suggested) == searcher.max_trials() == sum(a.trials + budget.runs(a.grid) for a in arms)
    expected = {}
    for a in arms:
        sel = [s for s in suggested if s["strategy"] == a.name and s["phase"] == "selection"]
        best = select_best([score(s) for s in sel])
        assert best["index"] == 4 if 4 in [s["index"] for s in sel] else best["status"] == "ok"
        runs = budget.runs(a.grid)
        accs = [0.8 + 0.01 * r for r in range(1, runs + 1)]
        summary = {"test_acc_mean": statistics.fmean(accs), "test_acc_std": statistics.stdev(accs), "runs_ok": runs}
        expected[a.name] = [("started", f"{a.name}/selection", a.trials, None), ("ended", f"{a.name}/selection", a.trials, None),
                            ("selected", a.name, best["key"]), ("started", f"{a.name}/assessment", runs, best["key"]),
                            ("ended", f"{a.name}/assessment", runs, summary)]
        ass = [s for s in suggested if s["strategy"] == a.name and s["phase"] == "assessment"]
        strip = ("split", "epochs", "patience", "seed", "data_seed")
        for s in ass:  # the selected config, re-trained on the outer split with seeds 1..R
            assert {k: v for k, v in s["config"].items() if k not in strip} == {k: v for k, v in best["config"].items() if k not in strip}
            assert s["config"]["split"] == "outer" and s["config"]["seed"] == s["index"]
        assert all(s["family"] == a.family and s["repeat"] == a.repeat for s in sel + ass)
        if a.family == "asha":
            assert all(s["report_at"] for s in sel)
    # each arm's sweeps in its own order; the arms' sweeps overlap (test_phase_overlap.py covers when they may)
    assert {a.name: [c for c in hooks.calls if c[1].split("/")[0] == a.name] for a in arms} == expected
    assert len(hooks.calls) == sum(map(len, expected.values()))
    assert [r.strategy for r in searcher.results] == [a.name for a in arms]
    assert all(r.selected["index"] != 2 for r in searcher.results)  # a diverged trial is never selected
    assert {r.summary["runs_ok"] for r in searcher.results} == {2}
    assert searcher.suggest("after") == FINISHED
    assert set(hooks.walls) >= {f"{a.name}/{ph}" for a in arms for ph in ("selection", "assessment")}


@pytest.mark.parametrize("families,fuse", [(["fixed", "awnn", "random", "asha", "tpe"], None), (["fixed", "awnn"], 4)])
def test_most_at_once_bounds_the_trials_in_flight_and_is_reached_by_a_loop_without_limit(budget, tmp_path, families, fuse):
    """search/phase_plan.most_at_once: what init_ray warms workers for.  A loop that runs every trial it is handed
    never holds more (fused: fewer); unfused, the arms' selections all start together and reach it."""
    from search.phase_plan import most_at_once

    arms, record, hooks, searcher = make(families, budget, tmp_path, window=10**6)  # (a loop without limit: no wait)
    if fuse:
        searcher = PhasedSearcher(arms, budget, record, hooks, prior=None, stream=io.StringIO(), trial_settings={"x": 1}, fuse=fuse,
                                  make_tpe=lambda arm: TpeSource(arm, budget, f"sqlite:///{tmp_path / 'o.db'}", f"s-{arm.name}", window=10**6))
    peak: list[int] = []
    drive(searcher, record, concurrency=10**6, peak=peak)
    bound = most_at_once(arms, budget)
    assert bound == sum(max(a.trials, budget.runs(a.grid)) for a in arms)
    assert peak[0] <= bound if fuse else peak[0] == bound, (peak, bound)
    if fuse:
        assert peak[0] < bound


def test_most_at_once_counts_an_arms_retraining_where_it_outnumbers_its_selection(budget):
    from types import SimpleNamespace

    from search.phase_plan import most_at_once

    class Runs:  # three re-training runs, ten folds of the second grid
        def runs(self, grid):
            return 3

        def folds_for(self, grid):
            return 10 if grid == "cv" else 1
    arms = [SimpleNamespace(trials=1, grid="holdout"), SimpleNamespace(trials=5, grid="cv")]
    assert most_at_once(arms, Runs()) == 3 + 5 * 10


def test_tpe_arm_asks_and_tells_its_study(budget, tmp_path):
    arms, record, hooks, searcher = make(["tpe"], budget, tmp_path, seed=3)
    suggested = drive(searcher, record)
    sel = [s for s in suggested if s["phase"] == "selection"]
    assert len(sel) == arms[0].trials and all(s["config"] and s["index"] >= 0 for s in sel)
    study = searcher.tpe["tpe"].study
    trials = trained_trials(study)
    assert len(trials) == len(sel)
    # the selection sweep's metric: the study's repeats (search/tpe.py), every driver's
    (ended,) = [c for c in hooks.calls if c[:2] == ("ended", "tpe/selection")]
    assert ended[3] == {"tpe_repeats": len(study.trials) - len(trials)}
    told = {t.user_attrs["awnn_trial_key"]: (t.state.name, t.value) for t in trials}
    for s in sel:  # usable scores told as values, a diverged trial as failed
        o = score(s)
        assert told[s["key"]] == (("FAIL", None) if o["status"] == "diverged" else ("COMPLETE", o["best_val_acc"]))
    # the study and the tool agree on the selection, and the study names its objective
    selected = searcher.results[0].selected["key"]
    assert study.user_attrs["awnn_selected_key"] == selected
    assert study.trials[study.user_attrs["awnn_selected_number"]].user_attrs["awnn_trial_key"] == selected
    # Optuna's own best_trial is the first of the tied best scores; the protocol breaks the tie by loss, then grid
    # position, so the two may name different trials of the same score: the user attribute says which one was re-trained
    assert study.best_value == study.trials[study.user_attrs["awnn_selected_number"]].value
    assert study.metric_names == ["best_val_acc"] and "inner validation" in study.user_attrs["awnn_objective"]


def test_resume_skips_finished_trials_and_reruns_from_checkpoints(budget, tmp_path):
    arms = make_arms("doublemoon", ["fixed", "awnn"], StrategyOptions(), budget)
    fixed_sel = arms[0].selection_specs(budget)
    awnn_sel = arms[1].selection_specs(budget)
    prior = PriorAttempts(
        finished={f"fixed/selection/{s.key}": score(s.to_dict()) for s in fixed_sel},
        reruns={f"awnn/selection/{awnn_sel[1].key}": Rerun(config=awnn_sel[1].config, index=1, checkpoint="/ckpt/awnn-sel-0001")},
        wall_seconds={"fixed/selection": 100.0},
    )
    _, record, hooks, searcher = make(["fixed", "awnn"], budget, tmp_path, prior=prior)
    assert searcher.pending_trials()
    suggested = drive(searcher, record)
    assert not [s for s in suggested if s["strategy"] == "fixed" and s["phase"] == "selection"]
    assert len(suggested) == searcher.max_trials() - len(fixed_sel)
    assert [s["resume_from"] for s in suggested if s["strategy"] == "awnn" and s["key"] == awnn_sel[1].key] == ["/ckpt/awnn-sel-0001"]
    fixed = searcher.results[0]
    assert len(fixed.selection.outcomes) == len(fixed_sel) and fixed.selected["index"] == 4
    assert fixed.selection.wall_seconds == pytest.approx(100.0)  # nothing ran here: the earlier drivers' time only
    assert ("ended", "fixed/selection", len(fixed_sel), None) in hooks.calls


def test_nothing_pending_when_every_trial_finished(budget, tmp_path):
    arms = make_arms("doublemoon", ["awnn"], StrategyOptions(), budget)
    finished = {f"awnn/selection/{s.key}": score(s.to_dict()) for s in arms[0].selection_specs(budget)}
    best = select_best(finished.values())
    from search.protocol import assessment_specs
    finished.update({f"awnn/assessment/{s.key}": score(s.to_dict()) for s in assessment_specs(best["config"], arms[0].grid, budget)})
    _, record, hooks, searcher = make(["awnn"], budget, tmp_path, prior=PriorAttempts(finished=finished))
    assert not searcher.pending_trials()
    searcher.finish_all()  # what the Comparison does when Ray is not needed
    assert [c[0] for c in hooks.calls] == ["started", "ended", "selected", "started", "ended"]
    assert searcher.results[0].summary["runs_ok"] == budget.runs(arms[0].grid)


def test_an_arm_without_a_usable_selection_trial_is_not_retrained(budget, tmp_path):
    def all_fail(spec):
        return {**score(spec), "status": "failed", "best_val_acc": math.nan} if spec["phase"] == "selection" else score(spec)

    arms, record, hooks, searcher = make(["awnn"], budget, tmp_path)
    suggested = drive(searcher, record, outcome=all_fail)
    assert {s["phase"] for s in suggested} == {"selection"}
    assert [c[0] for c in hooks.calls] == ["started", "ended"]
    assert hooks.logs == ["awnn: no selection trial finished with a validation score; no re-training"]
    assert searcher.results[0].selected is None and searcher.results[0].assessment is None


def test_trials_ray_never_ran_fail_the_driver_not_the_trials(budget, tmp_path):
    """Tune returned with trials of the phase in progress (and later phases)
    never run: no outcome is invented for them, the phase is not closed, and
    the error names them (the driver fails; --resume runs them)."""
    _, record, hooks, searcher = make(["awnn"], budget, tmp_path)
    first = searcher.suggest("t0")["spec"]
    record.finished(f"awnn/selection/{first['key']}", score(first))
    with pytest.raises(TrialsNotRun, match=r"Ray Tune ended before 5 trial\(s\) of awnn/selection ran \(sel-0001, .* --resume"):
        searcher.finish_all()
    assert [c[0] for c in hooks.calls] == ["started"]  # the selection sweep stays open: nothing "ended"
    assert searcher.results[0].selection.outcomes == [] and set(record.here) == {f"awnn/selection/{first['key']}"}


def test_finish_all_closes_a_phase_whose_trials_all_finished_here(budget, tmp_path):
    """Ray returned after the selection's last trial ended, before it asked for more: the
    phases with nothing left to run close, a phase with trials to run is reported."""
    _, record, hooks, searcher = make(["awnn"], budget, tmp_path)
    specs = []
    while isinstance(answer := searcher.suggest(f"t{len(specs)}"), dict):
        specs.append(answer["spec"])
    for sp in specs:
        record.finished(f"awnn/selection/{sp['key']}", score(sp))
    with pytest.raises(TrialsNotRun, match="of awnn/assessment ran"):
        searcher.finish_all()
    assert [c[0] for c in hooks.calls] == ["started", "ended", "selected", "started"]


def test_outcome_record():
    seen: list[str] = []
    rec = OutcomeRecord(earlier={"a/selection/sel-0000": {"status": "ok"}}, listener=seen.append)
    rec.reported("a/selection/sel-0001", {"best_val_acc": 0.5})
    rec.reported("a/selection/sel-0002", {"best_val_acc": math.nan})
    rec.reported("a/selection/sel-0002", {"best_val_acc": True})
    rec.reported("a/assessment/ass-01", {"best_val_acc": 0.7})
    rec.reported("a/selection/sel-0001", {"best_val_acc": 0.4})
    assert rec.best_val_acc == {"a/selection": 0.5, "a/assessment": 0.7}
    rec.finished("a/selection/sel-0001", {"status": "ok", "n": 1})
    rec.finished("a/selection/sel-0001", {"status": "failed", "n": 2})  # the first outcome of a key counts
    rec.finished("a/selection/sel-0000", {"status": "failed"})  # finished by an earlier driver already
    assert rec.here == {"a/selection/sel-0001": {"status": "ok", "n": 1}}
    assert rec.done() == {"a/selection/sel-0000", "a/selection/sel-0001"}
    assert rec.is_new("a/selection/sel-0001") and not rec.is_new("a/selection/sel-0000")
    assert seen == ["a/selection/sel-0001", "a/selection/sel-0002", "a/selection/sel-0002", "a/assessment/ass-01",
                    "a/selection/sel-0001", "a/selection/sel-0001"]


def test_progress_line_shows_trials_inside_long_epochs(budget, tmp_path):
    _, record, hooks, searcher = make(["awnn"], budget, tmp_path)
    spec = searcher.suggest("t0")["spec"]
    key = f"awnn/selection/{spec['key']}"
    searcher.progress.min_interval = 0.0
    record.reported(key, {"best_val_acc": math.nan, "epochs": [], "progress": {"epoch": 1, "batch": 45, "batches": 100}})
    assert "  inside epochs: epoch 1 at 45%" in searcher.stream.getvalue().splitlines()[-1]
    record.reported(key, {"best_val_acc": 0.7, "epochs": [{"epoch": 1}]})  # the epoch ended
    assert key not in record.in_epoch and "inside epochs" not in searcher.stream.getvalue().splitlines()[-1]
    record.reported(key, {"progress": {"epoch": 2, "batch": 10, "batches": 100}})
    record.finished(key, score(spec))
    assert key not in record.in_epoch


def test_progress_line_names_four_trials_inside_epochs_and_counts_the_rest(budget, tmp_path):
    _, record, hooks, searcher = make(["awnn"], budget, tmp_path)
    searcher.progress.min_interval = 0.0
    keys = [f"awnn/selection/{searcher.suggest(f't{i}')['spec']['key']}" for i in range(6)]
    for i, key in enumerate(keys):
        record.reported(key, {"progress": {"epoch": 3, "batch": 10 * i, "batches": 100}})
    line = searcher.stream.getvalue().splitlines()[-1]
    assert "  inside epochs: epoch 3 at 0%, epoch 3 at 10%, epoch 3 at 20%, epoch 3 at 30% (+2 more)" in line, line


def test_progress_line_counts_phases(budget, tmp_path):
    _, record, hooks, searcher = make(["fixed", "awnn"], budget, tmp_path)
    searcher.suggest("t0")
    line = searcher.stream.getvalue().splitlines()[-1]
    assert line.startswith("fixed selection: 0/") and "phase 1/4" in line
    # nothing finished yet: no rate, so no overall estimate
    assert line.endswith("all phases eta ~?") and ", 0 running  elapsed" in line


def test_progress_line_counts_running_and_stopped_trials_and_estimates_the_whole_comparison(budget, tmp_path):
    _, record, hooks, searcher = make(["fixed", "awnn"], budget, tmp_path)
    searcher.progress_interval = 0.0
    specs = [searcher.suggest(f"t{i}")["spec"] for i in range(3)]
    searcher.progress.min_interval = 0.0
    keys = [f"fixed/selection/{sp['key']}" for sp in specs]
    record.reported(keys[1], {"best_val_acc": math.nan, "epochs": []})  # started; keys[2] waits for a slot
    record.finished(keys[0], {**score(specs[0]), "status": "stopped"})
    line = searcher.stream.getvalue().splitlines()[-1]
    assert "1/" in line and "(1 stopped), 1 running, 1 pending" in line, line
    record.finished(keys[1], score(specs[1]))
    line = searcher.stream.getvalue().splitlines()[-1]
    assert "(1 stopped), 0 running, 1 pending" in line and re.search(r"all phases eta [~>](\d+s|\d+m\d\ds|\d+h\d\dm)$", line), line

    def seconds(text: str) -> int:
        h, m, s = (re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups(default="0"))
        return 3600 * int(h) + 60 * int(m) + int(s)

    phase_eta = re.search(r"  eta (\S+)  phase", line).group(1)
    overall = re.search(r"all phases eta [~>](\S+)$", line).group(1)
    assert seconds(overall) >= seconds(phase_eta), line  # the phase's own remainder, then the later phases


def test_summary_warns_about_smoke_budgets_and_saturated_tasks():
    from types import SimpleNamespace

    from search.summary import caveats

    def arm(acc, name="fixed", selected=None, outcomes=(), learns=False):
        summary = {"test_acc_mean": acc} if acc is not None else {}
        return SimpleNamespace(strategy=name, summary=summary, selected=selected, selection=SimpleNamespace(outcomes=list(outcomes)),
                               learns_widths=learns)

    lines = caveats("smoke", [arm(1.0), arm(0.999, "awnn", learns=True)])  # (a smoke budget says nothing of a draw's cost)
    assert len(lines) == 2 and "smoke budget" in lines[0] and "saturated" in lines[1]
    assert caveats("quick", [arm(1.0), arm(0.9, "tpe")]) == []
    assert caveats("quick", [arm(None)]) == []
    # an arm that learns its widths, compared with another: its cost is one draw (tracking/caveats.py one_draw_caveat)
    (line,) = caveats("quick", [arm(1.0), arm(0.9, "awnn", learns=True)])
    assert line.startswith("awnn learns its widths: ") and "--train-seed S" in line
    assert caveats("quick", [arm(0.9, "awnn", learns=True)]) == []  # alone: nothing to compare its cost with
    # a selection won on a tie of inner validation accuracy (tracking/caveats.py selection_ties), from the phases' outcomes
    tie = [{"key": "sel-0001", "status": "ok", "best_val_acc": 1.0, "best_val_loss": 0.1, "config": {}},
           {"key": "sel-0002", "status": "ok", "best_val_acc": 1.0, "best_val_loss": 0.2, "config": {}}]
    (line,) = caveats("quick", [arm(0.9, "awnn", selected={"key": "sel-0001"}, outcomes=tie)])
    assert line.startswith("awnn: its selected config sel-0001 won a tie: 2 configs") and "for sel-0002, the next" in line
    on_loss = [{**o, "config": {"select_metric": "loss"}} for o in tie]
    assert caveats("quick", [arm(0.9, "fixed", selected={"key": "sel-0001"}, outcomes=on_loss)]) == []


class _Clock:
    """time.monotonic for the searcher and the record, moved by the test."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _seconds(text: str) -> int:
    h, m, s = (re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups(default="0"))
    return 3600 * int(h) + 60 * int(m) + int(s)


@pytest.mark.parametrize("family", ["fixed", "asha"])
def test_the_eta_is_never_less_than_a_running_trial_needs_at_its_own_pace(tmp_path, monkeypatch, family):
    """The etas once read only the mean time per finished trial: with cheap
    trials finishing first (a fused group's small nets), the line said
    `eta 15s` for two minutes while a slow trial had minutes left.  Now a
    running trial's own pace bounds them: to its last epoch, or for ASHA to
    its next rung (where the scheduler may stop it), never beyond."""
    import search.phases
    import search.record

    clock = _Clock()
    monkeypatch.setattr(search.phases.time, "monotonic", clock)
    monkeypatch.setattr(search.record.time, "monotonic", clock)
    _, record, hooks, searcher = make([family, "awnn"], resolve_budget("quick"), tmp_path)
    searcher.progress.min_interval = 0.0
    specs = [searcher.suggest(f"t{i}")["spec"] for i in range(27)]
    assert not any(sp.get("members") for sp in specs)
    keys = [f"{family}/selection/{sp['key']}" for sp in specs]
    slow, cheap = 26, range(25)
    epochs = specs[slow]["config"]["epochs"]
    rungs = [r for r in specs[slow].get("report_at") or () if 2 < r < epochs]
    until = rungs[0] if family == "asha" and rungs else epochs
    assert epochs >= 4 and until > 2 and (family != "asha" or until < epochs)
    clock.t += 5
    record.reported(keys[slow], {"best_val_acc": 0.5, "epochs": [{"epoch": 1}]})
    clock.t += 5
    for i in cheap:  # cheap trials: 10 s
        record.finished(keys[i], score(specs[i]))
    clock.t += 100
    record.reported(keys[slow], {"best_val_acc": 0.6, "epochs": [{"epoch": 2}]})  # 105 s for its second epoch
    line = searcher.stream.getvalue().splitlines()[-1]
    phase_eta = _seconds(re.search(r"  eta (\S+)  phase", line).group(1))
    overall = _seconds(re.search(r"all phases eta [~>](\S+?)(?:  |$)", line).group(1))
    total = len(searcher.plan.open()[0].keys)
    mean_based = 110 / len(cheap) * (total - len(cheap))  # what the line said before
    needs = (until - 2) * 105  # the slow trial at its own pace
    assert needs > mean_based and phase_eta == pytest.approx(needs, abs=1) and overall >= phase_eta, line
    # a retry that went back to an earlier checkpoint starts its pace afresh (no pace: the mean alone)
    record.reported(keys[slow], {"best_val_acc": 0.6, "epochs": [{"epoch": 1}]})
    assert record.time_left(keys[slow], epochs) != record.time_left(keys[slow], epochs)  # nan
    clock.t += 10
    record.reported(keys[slow], {"best_val_acc": 0.6, "epochs": [{"epoch": 2}]})
    assert record.time_left(keys[slow], until) == pytest.approx((until - 2) * 10)
    record.finished(keys[slow], score(specs[slow]))
    assert keys[slow] not in record.paces
    record.reported(keys[slow], {"epochs": [{"epoch": 3}]})  # a late report of a finished trial adds no pace
    assert keys[slow] not in record.paces


def test_the_whole_comparisons_eta_follows_each_arms_measured_cost(tmp_path, monkeypatch):
    """A simulated run on 2 slots: fixed trials cost 1 s an epoch, AWNN trials
    8 s.  The whole comparison's eta once was this driver's mean time per
    finished trial times the trials left: the cheap fixed trials finish first,
    and it read 2-4x too low (a standard SpiralHard run: `~52s` with four
    minutes left).  Now each unfinished phase counts at its own arm's
    measured device-seconds per config-epoch; before an arm has a finished
    trial the line says `>` (a lower bound), and once every arm has one, the
    eta stays within a factor of 1.5 of the time the run really had left."""
    import search.phases
    import search.record

    clock = _Clock(0.0)
    monkeypatch.setattr(search.phases.time, "monotonic", clock)
    monkeypatch.setattr(search.record.time, "monotonic", clock)
    _, record, hooks, searcher = make(["fixed", "awnn"], resolve_budget("quick"), tmp_path)
    searcher.progress.min_interval = 0.0
    cost = {"fixed": 1.0, "awnn": 8.0}  # wall (= device) seconds per epoch, one device per trial
    running: list[tuple[float, str, dict, float]] = []  # (when it ends, Ray trial id, spec, when it started)
    seen: list[tuple[float, str, float]] = []  # (time, the line's sign, its whole-comparison eta)
    mean_based: list[tuple[float, float]] = []  # (time, what the mean per finished trial alone gives)
    n = 0
    while True:
        answer = None
        while len(running) < 2:
            answer = searcher.suggest(f"t{n}")
            if not isinstance(answer, dict):
                break
            spec = answer["spec"]
            assert not spec.get("members")
            running.append((clock.t + cost[spec["family"]] * spec["config"]["epochs"], f"t{n}", spec, clock.t))
            n += 1
        if not running:
            assert answer == FINISHED
            break
        running.sort(key=lambda r: r[0])
        end, tid, spec, _ = running.pop(0)
        clock.t = end
        for _, _, other, start in running:  # the others report the epochs they have trained (their pace)
            epoch = int((clock.t - start) // cost[other["family"]])
            if epoch >= 1:
                record.reported(f"{other['strategy']}/{other['phase']}/{other['key']}", {"best_val_acc": 0.5, "epochs": [{"epoch": epoch}]})
        key = f"{spec['strategy']}/{spec['phase']}/{spec['key']}"
        out = {**score(spec), "epochs_run": spec["config"]["epochs"], "device_hours": cost[spec["family"]] * spec["config"]["epochs"] / 3600}
        record.finished(key, out)
        searcher.on_trial_complete(tid, {"final": out})
        line = searcher.stream.getvalue().splitlines()[-1]
        m = re.search(r"all phases eta ([~>])(\S+?)(?:  |$)", line)
        if m and m.group(2) != "?":
            seen.append((clock.t, m.group(1), _seconds(m.group(2))))
            finished = len(record.here)
            left = searcher.max_trials() - finished
            mean_based.append((clock.t, clock.t / finished * left))
    searcher.finish_all()
    total = clock.t
    lower = [(t, eta) for t, sign, eta in seen if sign == ">"]
    measured = [(t, eta) for t, sign, eta in seen if sign == "~" and total - t >= 0.2 * total]
    assert lower and measured
    assert all(eta <= 1.05 * (total - t) for t, eta in lower)  # a lower bound indeed
    ratios = [eta / (total - t) for t, eta in measured]
    assert all(1 / 1.5 <= r <= 1.5 for r in ratios), ratios
    old = [est / (total - t) for t, est in mean_based if total - t >= 0.2 * total]
    assert min(old) < 0.5  # what the line said before: far too low


def test_the_whole_comparisons_eta_stays_sane_when_the_finished_trials_were_short(tmp_path, monkeypatch):
    """Configs that diverge or hit max_width after an epoch finish in a moment
    with almost no device time, while a slow config runs: the devices this
    driver kept busy were read from the finished trials alone (~0), and the
    line said `all phases eta ~8h19m` beside a phase eta of 33 s (a real
    sweep, lr 1e6 and rate 1e-4 in the grid).  Now the running trials count
    too, and never fewer than one trial's devices are busy."""
    import search.phases
    import search.record

    clock = _Clock(0.0)
    monkeypatch.setattr(search.phases.time, "monotonic", clock)
    monkeypatch.setattr(search.record.time, "monotonic", clock)
    _, record, hooks, searcher = make(["awnn"], resolve_budget("quick"), tmp_path)
    searcher.progress.min_interval = 0.0
    specs = []
    while True:
        answer = searcher.suggest(f"t{len(specs)}")
        if not isinstance(answer, dict):
            break
        specs.append(answer["spec"])
    keys = [f"{sp['strategy']}/{sp['phase']}/{sp['key']}" for sp in specs]
    slow, short = keys[-1], keys[:-1]
    epochs = specs[-1]["config"]["epochs"]
    per_epoch = 1.5  # the slow config: 1.5 s an epoch on one device
    clock.t = 1.0
    for key, sp in zip(short, specs):  # each diverged in its first epoch: 0.05 device-seconds
        record.finished(key, {**score(sp), "status": "diverged", "epochs_run": 1, "device_hours": 0.05 / 3600})
    for epoch in range(1, 11):
        clock.t = 1.0 + per_epoch * epoch
        record.reported(slow, {"best_val_acc": 0.5, "epochs": [{"epoch": epoch}]})
    line = searcher.stream.getvalue().splitlines()[-1]
    phase_eta = _seconds(re.search(r"  eta (\S+)  phase", line).group(1))
    overall = _seconds(re.search(r"all phases eta [~>](\S+?)(?:  |$)", line).group(1))
    selection_left = (epochs - 10) * per_epoch
    assert phase_eta == pytest.approx(selection_left, abs=1), line
    # then the re-training runs at the arm's measured cost: at most all of them on one device, one after another
    runs = resolve_budget("quick").runs(searcher.plan.open()[0].arm.grid)
    assert selection_left <= overall <= selection_left + runs * epochs * per_epoch * 1.5, line


def test_the_whole_comparisons_eta_is_never_less_than_the_phase_on_the_line(tmp_path, monkeypatch):
    """Trials whose training is nearly free but whose start and end take wall
    time (smoke trials of a tiny MLP: a Ray actor, MLflow runs) once gave
    `eta 17h29m  phase 1/2  all phases eta ~7m04s` on a 99,000-config grid:
    the whole comparison's eta counts device-seconds only."""
    import search.phases
    import search.record

    clock = _Clock()
    monkeypatch.setattr(search.phases.time, "monotonic", clock)
    monkeypatch.setattr(search.record.time, "monotonic", clock)
    _, record, hooks, searcher = make(["fixed"], resolve_budget("quick"), tmp_path)
    searcher.progress.min_interval = 0.0
    specs = [searcher.suggest(f"t{i}")["spec"] for i in range(10)]
    keys = [f"fixed/selection/{sp['key']}" for sp in specs]
    for k, sp in zip(keys, specs):
        clock.t += 10  # 10 s of wall time a trial, for 0.036 device-seconds of training
        record.finished(k, {**score(sp), "device_hours": 1e-5, "compute_seconds": 0.036, "epochs_run": sp["config"]["epochs"]})
    line = searcher.stream.getvalue().splitlines()[-1]
    phase_eta = _seconds(re.search(r"  eta (\S+)  phase", line).group(1))
    overall = _seconds(re.search(r"all phases eta [~>](\S+?)(?:  |$)", line).group(1))
    left = len(searcher.plan.open()[0].keys) - 10
    assert phase_eta == pytest.approx(10 * left, abs=2) and overall >= phase_eta, line


def test_the_progress_text_is_built_only_when_the_line_is_drawn(tmp_path, monkeypatch):
    """Building it reads every open trial: at each report of a 99,000-config grid it took most of the
    driver's CPU (95 configs done in its first minute; 8,968 once it was built only when drawn)."""
    from search.phases import PhasedSearcher

    _, record, hooks, searcher = make(["fixed"], resolve_budget("quick"), tmp_path)
    built = []
    real = PhasedSearcher._progress_text
    monkeypatch.setattr(PhasedSearcher, "_progress_text", lambda self, *a: built.append(1) or real(self, *a))
    searcher.progress.min_interval = 3600.0  # one line an hour
    specs = [searcher.suggest(f"t{i}")["spec"] for i in range(10)]
    for sp in specs:
        record.finished(f"fixed/selection/{sp['key']}", {**score(sp), "epochs_run": 1})
    assert len(built) == 1 and len(searcher.stream.getvalue().splitlines()) == 1


@pytest.mark.parametrize("uptime", [0.5, 50.0, 3000.0])
def test_a_freshly_booted_machine_draws_the_first_progress_line_and_records_the_first_wall(tmp_path, monkeypatch, uptime):
    """time.monotonic() counts from the machine's boot: 'never drawn' and 'never
    recorded' are -inf, not 0.0, or a machine up for less than the interval
    (a fresh CI VM: 3000 s against an interval of an hour) drew no line and
    recorded no wall time until it had been up that long."""
    import time

    from search.progress import ProgressLine

    clock = [uptime]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    line = ProgressLine(io.StringIO(), log_interval=3600.0)
    assert line.due()
    line.update("first")
    line.update("too soon")
    clock[0] += 3600.0
    line.update("an hour later")
    assert line.stream.getvalue().splitlines() == ["first", "an hour later"]

    clock[0] = uptime
    _, record, hooks, searcher = make(["fixed"], resolve_budget("quick"), tmp_path)
    searcher.progress.min_interval = 3600.0
    walls = []
    monkeypatch.setattr(searcher, "record_walls", lambda: walls.append(clock[0]))
    sp = searcher.suggest("t0")["spec"]
    record.finished(f"fixed/selection/{sp['key']}", {**score(sp), "epochs_run": 1})
    assert len(searcher.stream.getvalue().splitlines()) == 1 and walls == [uptime]
