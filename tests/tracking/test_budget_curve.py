"""The verdict against the budget and the paper-budget projection (issue #30
item 1), on comparisons written by hand to a real MLflow SQLite store (the
runs, tags, params and per-epoch metrics `awnn compare` writes), where the
answer is known: which config each arm selects after 1/8, 1/4, 1/2 and all
of its epochs, the device-hours had every trial stopped there, whether the
verdict is still moving, the projection's arithmetic, the comparison run's
metrics and the report's section."""
from __future__ import annotations

import json
import math

import pytest

from tracking import analysis as A
from tracking import contract as C
from tracking.contract import Metric, Param, Tag
from tracking.report import log_report, write_report
from tracking.budget_curve import load_budget_records, still_moving
from tracking.summary import headline_metrics, summarize

CID = "toy-20260101-000000-abcd"
EPOCHS = 8


def _best(acc, loss):
    """The trainer's best epoch (ties: the lower loss): (best val acc, its val loss, its epoch)."""
    i = max(range(len(acc)), key=lambda k: (acc[k], -loss[k], -k))
    return acc[i], loss[i], i + 1


class Store:
    """A comparison in a real MLflow SQLite store, written run by run as the driver and its callback write it."""

    def __init__(self, tmp_path, arms=("fixed", "awnn"), params=None, wall_seconds=3600.0):
        self.uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        self.c = C.client(self.uri)
        self.exp = self.c.create_experiment("awnn-toy")
        self.t = 1_000
        tags = {Tag.KIND: "comparison", Tag.COMPARISON: CID, Tag.TASK: "toy", Tag.BUDGET: "quick", Tag.STATE: "finished",
                Tag.ARMS: ",".join(arms), Tag.STRATEGIES: ",".join(arms)}
        self.root = self._run(tags, {Param.BUDGET: json.dumps({"name": "quick"}), Param.CPUS_PER_TRIAL: 1, Param.GPUS_PER_TRIAL: 0, **(params or {})})
        self.c.log_metric(self.root, Metric.WALL_SECONDS, wall_seconds, step=0)
        self.sweeps = {}

    def _run(self, tags, params):
        self.t += 10
        run = self.c.create_run(self.exp, start_time=self.t, tags=tags).info.run_id
        for k, v in params.items():
            self.c.log_param(run, k, v)
        return run

    def sweep(self, arm, phase, selected=None, trials=2, hidden_layers=1):
        tags = {Tag.KIND: "sweep", Tag.STRATEGY: arm, Tag.ARM: arm, Tag.PHASE: phase, Tag.COMPARISON: CID, Tag.STATE: "finished",
                **({Tag.SELECTED_KEY: selected, Tag.SELECTED_CONFIG: json.dumps({"hidden_layers": hidden_layers})} if selected else {})}
        self.sweeps[(arm, phase)] = self._run(tags, {Param.EPOCHS: EPOCHS, Param.TRIALS: trials})

    def trial(self, arm, key, acc, loss=None, dh=0.01, ts=None, phase="selection", index=0, hidden_layers=1, status="ok", test_acc=None):
        """A trial run: per-epoch val_acc, val_loss, best_val_acc and cumulative train_seconds (`ts`; None: none
        recorded), then its final metrics (step = epochs run), as tracking/callback.py logs them."""
        from mlflow.entities import Metric as M

        loss = loss or [1.0 - a for a in acc]
        tags = {Tag.KIND: "trial", Tag.STRATEGY: arm, Tag.ARM: arm, Tag.PHASE: phase, Tag.COMPARISON: CID, Tag.TRIAL_KEY: key, Tag.STATUS: status,
                "mlflow.parentRunId": self.sweeps[(arm, phase)]}
        model = "awnn" if arm == "awnn" else "fixed"
        run = self._run(tags, {"model": model, "hidden_layers": hidden_layers, "width": 16, "epochs": EPOCHS, "best_epoch_ties": "lower_loss",
                               "select_metric": "acc", Param.GRID_INDEX: index, Param.TRIAL_KEY: key, Param.PHASE: phase,
                               "split": "inner" if phase == "selection" else "outer"})
        rows, best = [], -1.0
        for e, (a, l) in enumerate(zip(acc, loss), start=1):
            best = max(best, a)
            rows += [M(Metric.VAL_ACC, a, 0, e), M(Metric.VAL_LOSS, l, 0, e), M(Metric.BEST_VAL_ACC, best, 0, e)]
            if ts is not None:
                rows.append(M(Metric.TRAIN_SECONDS, ts[e - 1], 0, e))
        b_acc, b_loss, b_epoch = _best(acc, loss)
        n = len(acc)
        final = {Metric.BEST_VAL_ACC: b_acc, Metric.BEST_VAL_LOSS: b_loss, Metric.BEST_EPOCH: b_epoch, Metric.EPOCHS_RUN: n,
                 Metric.DEVICE_HOURS: dh, Metric.COMPUTE_SECONDS: dh * 3600, Metric.GPU_HOURS: 0.0,
                 Metric.TRAIN_SECONDS: ts[-1] if ts else dh * 3600, **({Metric.TEST_ACC: test_acc} if test_acc is not None else {})}
        rows += [M(k, v, 0, n) for k, v in final.items()]
        self.c.log_batch(run, metrics=rows, synchronous=True)
        self.c.set_terminated(run, "FINISHED", end_time=self.t + 5)
        return run

    def summary(self):
        data = A.load_comparison(self.uri)
        return summarize(A.analyze(data, n_boot=20, n_orders=10), load_budget_records(data))


RISING = [0.5, 0.5, 0.5, 0.5, 0.5, 0.95, 0.95, 0.95]  # best only after half the epochs
EARLY = [0.6, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]  # best from epoch 2
STEADY = [0.7, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8]


def _comparison(tmp_path, late_winner: bool, **kw):
    """fixed: trials A (EARLY) and B (RISING, or flat at 0.5: never better); awnn: one STEADY trial."""
    s = Store(tmp_path, **kw)
    s.sweep("fixed", "selection", selected="sel-0001" if late_winner else "sel-0000", hidden_layers=2 if late_winner else 1)
    s.trial("fixed", "sel-0000", EARLY, dh=0.08, index=0)
    s.trial("fixed", "sel-0001", RISING if late_winner else [0.5] * EPOCHS, dh=0.08, index=1, hidden_layers=2)
    s.sweep("awnn", "selection", selected="sel-0000", trials=1)
    s.trial("awnn", "sel-0000", STEADY, dh=0.04)
    for arm, acc in (("fixed", 0.9), ("awnn", 0.85)):
        s.sweep(arm, "assessment")
        for k in range(2):
            s.trial(arm, f"ass-{k:02d}", STEADY, dh=0.004, phase="assessment", test_acc=acc)
    return s


def _row(summary, arm, fraction):
    return next(r for r in summary["budget_curve"]["arms"][arm] if r["fraction"] == fraction)


def test_a_config_that_wins_only_after_half_the_epochs_means_still_moving(tmp_path):
    s = _comparison(tmp_path, late_winner=True).summary()
    assert [_row(s, "fixed", f)["epochs"] for f in (0.125, 0.25, 0.5, 1.0)] == [1, 2, 4, 8]
    assert [_row(s, "fixed", f)["selected_key"] for f in (0.125, 0.25, 0.5, 1.0)] == ["sel-0000"] * 3 + ["sel-0001"]
    assert [_row(s, "fixed", f)["best_val_acc"] for f in (0.125, 0.25, 0.5, 1.0)] == [0.6, 0.9, 0.9, 0.95]
    assert _row(s, "fixed", 0.5)["selected_config"] == {"hidden_layers": 1} and _row(s, "fixed", 1.0)["selected_config"] == {"hidden_layers": 2}
    assert [_row(s, "awnn", f)["best_val_acc"] for f in (0.125, 0.25, 0.5, 1.0)] == [0.7, 0.8, 0.8, 0.8]
    # at all of the epochs the rule picks what the search picked (the sweep's awnn.selected_key)
    assert _row(s, "fixed", 1.0)["selected_key"] == s["strategies"]["fixed"]["selected_key"]
    assert s["budget_still_moving"] is True
    assert s["budget_verdict"].startswith("Still moving") and "fixed's selected config changed (sel-0000 -> sel-0001)" in s["budget_verdict"]
    assert s["budget_curve"]["curve"]["fixed"] == {"epochs": list(range(1, 9)), "best_val_acc": [0.6] + [0.9] * 4 + [0.95] * 3}


def test_a_winner_from_early_on_is_stable(tmp_path):
    s = _comparison(tmp_path, late_winner=False).summary()
    assert {_row(s, "fixed", f)["selected_key"] for f in (0.25, 0.5, 1.0)} == {"sel-0000"}
    assert s["budget_still_moving"] is False and s["budget_curve"]["still_moving_reasons"] == []
    assert s["budget_verdict"].startswith("Stable between half and full budget")


def test_ranking_of_the_arms_changing_is_still_moving(tmp_path):
    s = Store(tmp_path)
    s.sweep("fixed", "selection", selected="sel-0000", trials=1)
    s.trial("fixed", "sel-0000", RISING, dh=0.08)
    s.sweep("awnn", "selection", selected="sel-0000", trials=1)
    s.trial("awnn", "sel-0000", STEADY, dh=0.04)
    out = s.summary()
    assert out["budget_still_moving"] is True
    assert out["budget_curve"]["still_moving_reasons"] == ["fixed's best inner-validation accuracy rose 45.0 points (50.00% -> 95.00%)",
                                                           "the arms' ranking by best inner-validation accuracy changed (awnn > fixed -> fixed > awnn)"]


def test_device_hours_at_a_cut_follow_the_training_seconds_recorded_per_epoch(tmp_path):
    s = Store(tmp_path)
    s.sweep("fixed", "selection", selected="sel-0000")
    # 10% of its training time in the first half of its epochs: stopped at epoch 4 it would have cost 10% of 0.2
    s.trial("fixed", "sel-0000", EARLY, dh=0.2, ts=[1, 2, 3, 4, 10, 20, 30, 40])
    s.trial("fixed", "sel-0001", STEADY, dh=0.1, ts=None, index=1)  # no train_seconds records: epochs 4 of 8
    s.sweep("awnn", "selection", selected="sel-0000", trials=1)
    s.trial("awnn", "sel-0000", STEADY, dh=0.05, ts=[5 * e for e in range(1, 9)])  # linear: half
    out = s.summary()
    half, full = _row(out, "fixed", 0.5), _row(out, "fixed", 1.0)
    assert half["selection_device_hours"] == pytest.approx(0.1 * 0.2 + 0.5 * 0.1)
    assert _row(out, "fixed", 0.25)["selection_device_hours"] == pytest.approx(0.05 * 0.2 + 0.25 * 0.1)
    assert full["selection_device_hours"] == pytest.approx(0.3) == pytest.approx(out["device_hours"]["fixed"]["selection"])
    assert _row(out, "awnn", 0.5)["selection_device_hours"] == pytest.approx(0.025)
    # the savings as everywhere (tracking/savings.py): the baseline's (fixed) device-hours / the arm's, rounded to 3 digits
    assert out["budget_curve"]["baseline"] == "fixed" and list(out["budget_curve"]["savings"]) == ["awnn"]
    ratios = {r["fraction"]: r["value"] for r in out["budget_curve"]["savings"]["awnn"]}
    assert ratios[0.5] == 2.8 and ratios[1.0] == out["savings"]["awnn"]["selection"] == 6.0  # 0.07 / 0.025; 0.3 / 0.05
    # 2.8x at half, 6x at all: the savings moved by more than 10%
    assert out["budget_still_moving"] is True
    assert "awnn's savings vs fixed moved by 114% (2.80x -> 6.00x)" in out["budget_curve"]["still_moving_reasons"]


def test_ties_follow_the_searchs_selection_rule(tmp_path):
    """Equal accuracy: the lower loss; equal loss too: the lower grid index - as search/protocol.select_best."""
    from search.protocol import select_best

    s = Store(tmp_path)
    s.sweep("fixed", "selection", selected="sel-0002")
    s.trial("fixed", "sel-0000", [0.9] * EPOCHS, loss=[0.3] * EPOCHS, index=2)
    s.trial("fixed", "sel-0001", [0.9] * EPOCHS, loss=[0.2] * EPOCHS, index=5)
    s.trial("fixed", "sel-0002", [0.9] * EPOCHS, loss=[0.2] * EPOCHS, index=3)
    s.trial("fixed", "sel-0003", [0.8] + [0.99] * 7, loss=[0.1] * EPOCHS, index=0, status="diverged")
    out = s.summary()
    t = A.load_comparison(s.uri).trials()
    outcomes = [{"key": r.trial_key, "status": r.status, "best_val_acc": r.best_val_acc, "best_val_loss": r.best_val_loss,
                 "index": int(r.grid_index), "config": r.config} for r in t[t["phase"] == "selection"].itertuples()]
    assert select_best(outcomes)["key"] == _row(out, "fixed", 1.0)["selected_key"] == "sel-0002"
    # before its last epoch the diverged trial was still training, with its records: stopped at epoch 4 it is the best
    assert _row(out, "fixed", 0.5)["selected_key"] == "sel-0003" and _row(out, "fixed", 0.5)["best_val_acc"] == 0.99


def test_cross_validated_selection_is_fold_0s_and_the_cost_every_folds(tmp_path):
    s = Store(tmp_path)
    s.sweep("fixed", "selection", selected="f0-sel-0000")
    s.trial("fixed", "f0-sel-0000", EARLY, dh=0.1)
    s.trial("fixed", "f1-sel-0000", [0.99] * EPOCHS, dh=0.3)  # better, but another fold's
    s.sweep("awnn", "selection", selected="f0-sel-0000", trials=1)
    s.trial("awnn", "f0-sel-0000", STEADY, dh=0.04)
    out = s.summary()
    assert _row(out, "fixed", 1.0)["selected_key"] == "f0-sel-0000" and _row(out, "fixed", 1.0)["best_val_acc"] == 0.9
    assert _row(out, "fixed", 0.5)["selection_device_hours"] == pytest.approx(0.2) and out["budget_curve"]["cv_fold0"] == ["fixed", "awnn"]


def test_the_comparison_run_gets_the_budget_metrics(tmp_path):
    s = _comparison(tmp_path, late_winner=True)
    out = write_report(s.uri, tmp_path / "report")
    summary = out["summary"]
    m = dict(headline_metrics(summary))
    assert all(C.is_metric(n) for n in m), [n for n in m if not C.is_metric(n)]
    assert m["budget_curve.fixed.f0.125.best_val_acc"] == 0.6 and m["budget_curve.fixed.f1.best_val_acc"] == 0.95
    assert m["budget_curve.awnn.f0.5.selection_device_hours"] == pytest.approx(0.02)
    assert m["budget_curve.awnn.f1.savings_vs_fixed"] == summary["savings"]["awnn"]["selection"] and m["budget_still_moving"] == 1.0
    assert "budget_curve.fixed.f1.savings_vs_fixed" not in m  # the baseline has no savings against itself
    assert not C.is_metric("budget_curve.fixed.f0.5.no_such") and not C.is_metric("budget_curve.f0.5.best_val_acc")
    assert not any("savings_ratio" in n for n in m)  # the old name, which meant another direction, is gone
    log_report(s.uri, CID, out["out_dir"], summary=summary)
    logged = s.c.get_run(s.root).data.metrics
    assert logged["budget_curve.fixed.f0.5.best_val_acc"] == 0.9 and logged[C.BUDGET_STILL_MOVING] == 1.0


def test_the_report_has_the_verdict_section_with_its_table_plot_and_line(tmp_path):
    s = _comparison(tmp_path, late_winner=True)
    out = write_report(s.uri, tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    section = md.split("## Verdict against the budget", 1)[1].split("\n## ", 1)[0]
    assert "| fixed | 1/2 | 4 | sel-0000: hidden_layers=1 | 90.00% |" in section
    assert "| fixed | all | 8 | sel-0001: hidden_layers=2 | 95.00% |" in section
    assert "![" in section and "(budget_curve.png)" in section and "**Still moving:" in section
    png = tmp_path / "report" / "budget_curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "budget_curve.png" in out["plots"]["budget_curve"]


PAPER = {"fixed": {"trials": 10, "epochs": 100, "epochs_by_hidden_layers": {"2": 200}, "retrain_runs": 10, "folds": 1, "patience": 0},
         "awnn": {"trials": 4, "epochs": 100, "epochs_by_hidden_layers": {"2": 200}, "retrain_runs": 10, "folds": 1, "patience": 0}}


def test_paper_budget_projection_arithmetic(tmp_path):
    s = _comparison(tmp_path, late_winner=True, params={Param.PAPER_BUDGET: json.dumps(PAPER), Param.CLUSTER_CPUS: 4, Param.CLUSTER_GPUS: 0})
    out = write_report(s.uri, tmp_path / "report")
    pj = out["summary"]["paper_budget_projection"]
    assert pj["applicable"] and pj["devices"] == 4 and "4 CPU cores" in pj["basis"]
    fixed, awnn = pj["arms"]["fixed"], pj["arms"]["awnn"]
    # fixed: trials of 0.08 device-hours for 8 epochs, one with 1 hidden layer (100 paper epochs), one with 2 (200)
    assert fixed["selection_device_hours"] == pytest.approx((0.08 * 100 / 8 + 0.08 * 200 / 8) / 2 * 10)  # 15
    # re-training: 10 runs x 200 epochs (the selected config has 2 hidden layers) x 0.004 / 8 device-hours per epoch given
    assert fixed["retrain_epochs"] == 200 and fixed["retrain_device_hours"] == pytest.approx(10 * 200 * 0.004 / 8)  # 1
    assert awnn["selection_device_hours"] == pytest.approx(0.04 * 100 / 8 * 4) and awnn["device_hours"] == pytest.approx(2.0 + 0.5)
    assert fixed["wall_hours"] == pytest.approx(16 / 4) and pj["total"]["device_hours"] == pytest.approx(18.5)
    assert fixed["selection_hours_per_epoch"] == pytest.approx(0.01)
    m = dict(headline_metrics(out["summary"]))
    assert m["paper_budget.fixed.device_hours"] == pytest.approx(16) and m["paper_budget.awnn.wall_hours"] == pytest.approx(2.5 / 4)
    md = (tmp_path / "report" / "report.md").read_text()
    section = md.split("## Projection: the paper budget", 1)[1].split("\n## ", 1)[0]
    assert "**This is a projection, not a measurement.**" in section
    assert "| fixed | 10 x 100 (2 layers: 200) epochs | 0.01 | 15 | 10 x 200 epochs | 1 | 16 | 4.00 h |" in section
    assert "| all arms |" in section and "| 18.5 |" in section


def test_without_the_cluster_size_the_wall_time_uses_the_measured_concurrency(tmp_path):
    s = _comparison(tmp_path, late_winner=False, params={Param.PAPER_BUDGET: json.dumps(PAPER)}, wall_seconds=360.0)
    pj = s.summary()["paper_budget_projection"]
    measured = 2 * 0.08 + 0.04 + 4 * 0.004  # every run's device-hours, over 0.1 hours of wall-clock
    assert pj["devices"] == pytest.approx(measured / 0.1) and "measured concurrency" in pj["basis"]
    assert pj["arms"]["awnn"]["wall_hours"] == pytest.approx(2.5 / (measured / 0.1))


def test_a_store_without_the_paper_budget_says_so(tmp_path):
    s = _comparison(tmp_path, late_winner=False)
    pj = s.summary()["paper_budget_projection"]
    assert pj == {"applicable": False, "reason": "the comparison run has no `paper_budget` param (comparisons recorded before it)"}
    assert math.isfinite(s.summary()["budget_curve"]["savings"]["awnn"][0]["value"])


@pytest.mark.slow
def test_compare_records_what_the_paper_budget_would_run(smoke_comparison):
    """The driver logs the paper budget's sizes and the cluster's CPUs on the comparison run (DoubleMoon: 30 and 6 configs, 500 epochs, R = 10)."""
    root = A.find_comparison(smoke_comparison["tracking_uri"])[0]
    p = root.data.params
    paper = json.loads(p[Param.PAPER_BUDGET])
    assert paper["fixed"] == {"trials": 30, "epochs": 500, "epochs_by_hidden_layers": {}, "retrain_runs": 10, "folds": 1, "patience": 0}
    assert paper["awnn"]["trials"] == 6 and float(p[Param.CLUSTER_CPUS]) == 2 and float(p[Param.CLUSTER_GPUS]) == 0


def test_a_summary_without_the_records_says_they_were_not_read(tmp_path):
    s = _comparison(tmp_path, late_winner=True)
    out = A.analyze(A.load_comparison(s.uri), n_boot=20, n_orders=10).summary()
    assert out["budget_curve"]["arms"] == {} and out["budget_still_moving"] is None and "were not read" in out["budget_verdict"]
    assert not out["paper_budget_projection"]["applicable"] and not any(n.startswith("budget_") for n, _ in headline_metrics(out))


def _curve(fixed_half, fixed_full, awnn_half=("sel-0009", 0.9), awnn_full=("sel-0009", 0.9)):
    def rows(half, full):
        return [{"fraction": 0.5, "epochs": 5, "selected_key": half[0], "best_val_acc": half[1]},
                {"fraction": 1.0, "epochs": 10, "selected_key": full[0], "best_val_acc": full[1]}]
    return {"arms": {"fixed": rows(fixed_half, fixed_full), "awnn": rows(awnn_half, awnn_full)}, "baseline": "fixed", "savings": {}}


def test_a_selection_changing_among_tied_configs_is_not_moving():
    """A saturated task: the fixed grid's selection moves from one 100% config to
    another (the tie re-broken by validation loss): stable.  The same change to
    a better config: still moving."""
    moving, line, reasons = still_moving(_curve(("sel-0001", 1.0), ("sel-0002", 1.0)))
    assert moving is False and reasons == [] and line.startswith("Stable")
    moving, line, reasons = still_moving(_curve(("sel-0001", 0.95), ("sel-0002", 1.0)))
    assert moving is True and reasons == ["fixed's selected config changed (sel-0001 -> sel-0002)"]


def test_a_ranking_change_between_tie_and_order_reads_as_one():
    """Two arms tied at half the budget and ordered at the full budget (a tie
    broken): the reason shows the tie, so its two rankings never read the same."""
    moving, line, reasons = still_moving(_curve(("sel-0001", 0.9), ("sel-0001", 0.905)))  # (half a point: not a rise that moves)
    assert moving is True
    assert reasons == ["the arms' ranking by best inner-validation accuracy changed (fixed = awnn -> fixed > awnn)"]
    for reason in reasons:  # a ranking change names two different rankings
        before, after = reason.split("(", 1)[1].rstrip(")").split(" -> ")
        assert before != after


def test_the_same_config_still_learning_is_still_moving():
    """SpiralHard's or Spiral's AWNN at the standard budget: the same config
    selected at half and all of the epochs, its best inner-validation
    accuracy rising 93.25% -> 99.75%, the ranking held and the savings moved
    7%: still moving (the report had called it stable, "no arm's selection
    improved").  A rise of up to 1 point is not."""
    moving, line, reasons = still_moving(_curve(("sel-0001", 1.0), ("sel-0001", 1.0), ("sel-0002", 0.9325), ("sel-0002", 0.9975)))
    assert moving is True and reasons == ["awnn's best inner-validation accuracy rose 6.5 points (93.25% -> 99.75%)"]
    assert line.startswith("Still moving") and "a larger budget may change the verdict" in line
    moving, line, reasons = still_moving(_curve(("sel-0001", 1.0), ("sel-0001", 1.0), ("sel-0002", 0.99), ("sel-0002", 0.995)))
    assert moving is False and reasons == [] and "improved by more than 1 point" in line
