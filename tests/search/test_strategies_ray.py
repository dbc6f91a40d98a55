"""The search strategies beside the two grids: TPE (Optuna through Ray Tune),
ASHA over the fixed grid, random search, and repeats - on a real local Ray
with a real MLflow SQLite store and a real Optuna RDB storage.  ASHA's rungs
and the checks of the strategy flags, without Ray, are in
tests/search/test_strategies.py."""
from __future__ import annotations

import math
from collections import Counter, defaultdict

import optuna
import pytest
from mlflow.tracking import MlflowClient

from search.budget import resolve_budget
from search.grid import find_grid
from search.protocol import select_best
from search.strategies import StrategyOptions, make_arms

from searcher_helpers import trained_trials
from test_tpe_window import window_kept

pytestmark = pytest.mark.slow

ARMS = {"fixed": 30, "awnn": 6, "tpe.r1": 6, "tpe.r2": 6, "asha.r1": 30, "asha.r2": 30, "random.r1": 6, "random.r2": 6}


def _runs(uri: str):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return c, c.search_runs([exp.experiment_id], max_results=10000)


def _trials(runs, arm=None, phase=None):
    return [r for r in runs if r.data.tags.get("awnn.kind") == "trial"
            and (arm is None or r.data.tags["awnn.arm"] == arm) and (phase is None or r.data.tags["awnn.phase"] == phase)]


def test_every_arm_is_tagged_and_counted(all_strategies_comparison):
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    root = next(r for r in runs if r.data.tags.get("awnn.kind") == "comparison")
    assert root.data.tags["awnn.strategies"] == "fixed,awnn,tpe,asha,random"
    assert root.data.tags["awnn.arms"].split(",") == list(ARMS)
    assert root.data.tags["awnn.repeats"] == "2"
    sweeps = {(r.data.tags["awnn.arm"], r.data.tags["awnn.phase"]): r for r in runs if r.data.tags.get("awnn.kind") == "sweep"}
    assert set(sweeps) == {(a, ph) for a in ARMS for ph in ("selection", "assessment")}
    for arm, n in ARMS.items():
        family = arm.split(".")[0]
        sel, ass = _trials(runs, arm, "selection"), _trials(runs, arm, "assessment")
        assert len(sel) == n, arm
        assert len(ass) == 2, arm  # the smoke budget's R
        for t in sel + ass:
            assert t.data.tags["awnn.strategy"] == family
            assert t.data.tags["awnn.repeat"] == (arm.split(".r")[1] if ".r" in arm else "0")
            assert t.data.tags["mlflow.parentRunId"] == sweeps[(arm, t.data.tags["awnn.phase"])].info.run_id
        assert len({t.data.tags["awnn.trial_key"] for t in sel}) == n
    # the fixed-space strategies train fixed-width models from the fixed grid
    fixed_grid = find_grid("doublemoon", "fixed")
    points = {tuple(str(cfg[k]) for k in fixed_grid.grid) for cfg in fixed_grid.configs()}
    for t in _trials(runs):
        if t.data.tags["awnn.strategy"] in ("tpe", "asha", "random"):
            assert t.data.params["model"] == "fixed"
            assert tuple(t.data.params[k] for k in fixed_grid.grid) in points


def test_tpe_study_is_readable_with_optuna_and_matches_mlflow(all_strategies_comparison):
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    storage = all_strategies_comparison["optuna_storage"]
    cid = next(r for r in runs if r.data.tags.get("awnn.kind") == "comparison").data.tags["awnn.comparison"]
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage))
    assert names == [f"{cid}-tpe.r1", f"{cid}-tpe.r2"]
    grid = find_grid("doublemoon", "fixed")
    for arm in ("tpe.r1", "tpe.r2"):
        study = optuna.load_study(study_name=f"{cid}-{arm}", storage=storage)
        assert study.direction == optuna.study.StudyDirection.MAXIMIZE
        trained = trained_trials(study)  # (not the repeats: asks of a config trained already, told failed, search/tpe.py)
        assert len(trained) == 6  # the selection trials only, no re-training runs
        assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trained)
        assert len({tuple(t.params[k] for k in grid.grid) for t in trained}) == 6  # six configs, none trained twice
        repeats = len(study.trials) - len(trained)  # said by the driver where there were any, and the sweep run's metric
        said = [ln for ln in all_strategies_comparison["stderr"].splitlines() if ln.startswith(f"note: {arm}: TPE asked ")]
        assert said == ([f"note: {arm}: TPE asked {repeats} config{'s' if repeats != 1 else ''} it had asked before; "
                         f"{'they were' if repeats != 1 else 'it was'} told failed and asked again, not trained (search/tpe.py, \"Repeats\")"]
                        if repeats else []), said
        sweep = next(r for r in runs if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == "selection")
        assert sweep.data.params["optuna_study"] == f"{cid}-{arm}"
        assert sweep.data.metrics["tpe_repeats"] == repeats
        # asked with a window of the two slots under Ray Tune itself (search/tpe.py): trial k knowing trials 0 .. k - 2
        assert sweep.data.params["tpe_ask_window"] == "2" == str(study.user_attrs["awnn_ask_window"])
        assert window_kept(study, 2), arm
        # every told value is the best inner-validation accuracy MLflow holds for a trial with those params
        mlflow_scores = Counter()
        for t in _trials(runs, arm, "selection"):
            mlflow_scores[(tuple(t.data.params[k] for k in grid.grid), round(t.data.metrics["best_val_acc"], 9))] += 1
        optuna_scores = Counter((tuple(str(t.params[k]) for k in grid.grid), round(t.value, 9)) for t in trained)
        assert optuna_scores == mlflow_scores


def test_tpe_sampler_is_seeded(all_strategies_comparison):
    """Six trials are all TPE start-up trials, drawn by the seeded sampler: a
    fresh study with the same seed and space asks the same configs; the
    trained ones are those asks less the repeats of an earlier ask."""
    storage = all_strategies_comparison["optuna_storage"]
    grid = find_grid("doublemoon", "fixed")
    dists = {k: optuna.distributions.CategoricalDistribution(v) for k, v in grid.grid.items()}
    seqs = {}
    for s in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        seqs[s.study_name.rsplit("-", 1)[1]] = ([tuple(t.params[k] for k in grid.grid) for t in sorted(study.trials, key=lambda t: t.number)],
                                                 [tuple(t.params[k] for k in grid.grid) for t in trained_trials(study)])
    for arm, seed in (("tpe.r1", 0), ("tpe.r2", 1)):
        asked, trained = seqs[arm]
        fresh = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), direction="maximize")
        expected = []
        for _ in range(len(asked)):
            t = fresh.ask(dists)
            expected.append(tuple(t.params[k] for k in grid.grid))
            fresh.tell(t, 0.5)
        assert asked == expected, arm
        assert trained == list(dict.fromkeys(expected)) and len(trained) == 6, arm  # each config at its first ask
    assert seqs["tpe.r1"][1] != seqs["tpe.r2"][1]


def test_asha_stops_trials_early_and_their_compute_counts(all_strategies_comparison):
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    for arm in ("asha.r1", "asha.r2"):
        sel = _trials(runs, arm, "selection")
        status = Counter(t.data.tags["awnn.status"] for t in sel)
        assert status["stopped"] > 0 and status["ok"] > 0, status
        assert status["stopped"] + status["ok"] == 30
        for t in sel:
            m = t.data.metrics
            assert m["device_hours"] > 0 and m["compute_seconds"] > 0
            steps = [h.step for h in c.get_metric_history(t.info.run_id, "val_acc")]
            if t.data.tags["awnn.status"] == "stopped":
                # stopped at the rung (epoch 1 of 2): one epoch logged, no final epoch count
                assert steps == [1]
                assert t.info.status == "FINISHED"
            else:
                # with a report every epoch (the fixture's --report-interval 0), a trial that
                # ran to the end is ok, not stopped by ASHA's max_t rule on its last report
                assert m["epochs_run"] == 2 and steps == [1, 2]
        # the selected config is one that ran to the end
        sweep = next(r for r in runs if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == "selection")
        chosen = sweep.data.tags["awnn.selected_key"]
        assert next(t for t in sel if t.data.tags["awnn.trial_key"] == chosen).data.tags["awnn.status"] == "ok"
        assert sweep.data.params["asha_rungs"] == "1" and sweep.data.params["asha_grace_period"] == "1"


def test_asha_keeps_the_better_trials(all_strategies_comparison):
    """At the rung, a stopped trial scored below what ASHA had seen: no
    stopped trial beats every trial that went on."""
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    for arm in ("asha.r1", "asha.r2"):
        sel = _trials(runs, arm, "selection")
        # the best validation accuracy up to the rung (epoch 1): best_val_acc is a final value, val_acc the per-epoch series
        at_rung = {t.data.tags["awnn.trial_key"]: max(h.value for h in c.get_metric_history(t.info.run_id, "val_acc") if h.step <= 1) for t in sel}
        stopped = [k for k in at_rung if next(t for t in sel if t.data.tags["awnn.trial_key"] == k).data.tags["awnn.status"] == "stopped"]
        kept = [k for k in at_rung if k not in stopped]
        assert max(at_rung[k] for k in stopped) <= max(at_rung[k] for k in kept)


def test_random_search_draws_distinct_seeded_configs(all_strategies_comparison):
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    arms = make_arms("doublemoon", ["random"], StrategyOptions(seed=0, repeats=2), resolve_budget("smoke"))
    for arm in arms:
        recorded = sorted(int(t.data.params["grid_index"]) for t in _trials(runs, arm.name, "selection"))
        planned = sorted(sp.index for sp in arm.selection_specs(resolve_budget("smoke")))
        assert recorded == planned and len(set(recorded)) == 6
    first, second = ([sp.index for sp in a.selection_specs(resolve_budget("smoke"))] for a in arms)
    assert first != second  # another seed, another draw
    assert first == [sp.index for sp in make_arms("doublemoon", ["random"], StrategyOptions(seed=0), resolve_budget("smoke"))[0].selection_specs(resolve_budget("smoke"))]


def test_every_arm_follows_the_protocol(all_strategies_comparison):
    """Selection picks the best selectable inner-validation score of the arm's
    own trials; its config is re-trained on the outer split with seeds 1..R."""
    c, runs = _runs(all_strategies_comparison["tracking_uri"])
    for arm in ARMS:
        sel = _trials(runs, arm, "selection")
        outcomes = [{"key": r.data.tags["awnn.trial_key"], "status": r.data.tags["awnn.status"], "best_val_acc": r.data.metrics.get("best_val_acc", math.nan),
                     "best_val_loss": r.data.metrics.get("best_val_loss", math.nan), "index": int(r.data.params["grid_index"])} for r in sel]
        chosen = select_best(outcomes)
        sweep = next(r for r in runs if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == "selection")
        assert sweep.data.tags["awnn.selected_key"] == chosen["key"], arm  # (TPE trains no config twice: search/tpe.py, "Repeats")
        picked = next(r for r in sel if r.data.tags["awnn.trial_key"] == sweep.data.tags["awnn.selected_key"])
        ass = _trials(runs, arm, "assessment")
        assert sorted(int(r.data.params["seed"]) for r in ass) == [1, 2]
        for r in ass:
            assert r.data.params["split"] == "outer"
            for k in ("width", "activation", "lr", "hidden_layers", "model"):  # (an AWNN run has no `width` param: issue #17)
                assert r.data.params.get(k) == picked.data.params.get(k), (arm, k)
