"""What an MLflow user sees on a trial run (issue #32 item 4): curves, step =
epoch, only for what changes per epoch (train_nll first, the data loss of
every model), and the final scores and cost once, at step = the run's last
epoch; no name is both.  A real Trainer's epoch records and final summary
go through the real callback (Tune's trials faked as in test_callback.py)
into a real MLflow SQLite store."""
from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest

from awnn.config import TrainConfig
from awnn.train import Trainer
from search.budget import resolve_budget
from search.strategies import StrategyOptions, make_arms
from tracking import contract as C
from tracking.callback import TrialTracker
from tracking.store import TrackingWriter, init_tracking

EPOCHS = 3


@pytest.fixture
def store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    writer.start_run("cmp", name="compare-x", tags={C.Tag.KIND: "comparison"})
    for sweep in ("fixed/selection", "awnn/selection", "awnn/assessment"):
        writer.start_run(sweep, name=sweep.replace("/", "-"), parent="cmp", tags={C.Tag.KIND: "sweep"})
    tracker = TrialTracker(writer, tags={C.Tag.COMPARISON: "cmp-1", C.Tag.TASK: "doublemoon"}, cpus_per_trial=1, gpus_per_trial=0)
    yield SimpleNamespace(uri=uri, writer=writer, tracker=tracker)
    writer.close(timeout=30)


def spec(family: str, phase: str = "selection") -> dict:
    """A smoke-budget spec of `family` trained for EPOCHS epochs (a re-training one on the outer split)."""
    arm = make_arms("doublemoon", [family], StrategyOptions(), resolve_budget("smoke"))[0]
    s = copy.deepcopy(arm.selection_specs(resolve_budget("smoke"))[0].to_dict())
    s["config"]["epochs"] = EPOCHS
    if phase == "assessment":
        s.update(key="ass-00", phase="assessment")
        s["config"]["split"] = "outer"
    return s


def train(tracker: TrialTracker, s: dict, until: int | None = None):
    """Train the spec's config, reporting each epoch as search/trial.py does; `until`: the trial is
    stopped after that epoch (by a scheduler: no final) and a progress report inside the next one
    is its last.  Returns the fake Tune trial and the trainer's result."""
    trial = SimpleNamespace(config={"spec": s}, last_result={}, error_file=None, error_msg="")
    tracker.on_trial_start(0, [], trial)
    stop = RuntimeError("stopped by the scheduler")

    def on_epoch(rec):
        tracker.on_trial_result(0, [], trial, {"epoch": rec["epoch"], "attempt": "a1", "attempt_start_seconds": 0.0, "train_seconds": rec["train_seconds"],
                                               "best_val_acc": rec["best_val_acc"], "epochs": [rec], "final": None, "status": rec["status"]})
        if until is not None and rec["epoch"] == until:
            raise stop

    trainer = Trainer(TrainConfig.from_dict(s["config"]))
    try:
        result = trainer.run(on_epoch=on_epoch)
    except RuntimeError as e:
        assert e is stop
        progress = {"attempt": "a1", "attempt_start_seconds": 0.0, "train_seconds": trainer.train_seconds + 0.5,
                    "best_val_acc": trainer.best["val_acc"], "epochs": [], "final": None, "progress": {"epoch": until + 1, "batch": 3, "batches": 9}}
        tracker.on_trial_result(0, [], trial, progress)
        tracker.on_trial_complete(0, [], trial)
        return trial, None
    final = result.summary()
    final["test_acc"] = None if final["test_acc"] != final["test_acc"] else final["test_acc"]
    tracker.on_trial_result(0, [], trial, {"epoch": result.epochs_run, "attempt": "a1", "attempt_start_seconds": 0.0,
                                           "train_seconds": result.train_seconds, "epochs": [], "final": final, "status": final["status"]})
    tracker.on_trial_complete(0, [], trial)
    return trial, result


def histories(st, s: dict) -> tuple[object, dict[str, list[tuple[int, float]]]]:
    """The trial run of spec `s` and every metric's (step, value) history."""
    assert st.writer.flush(timeout=60)
    c = C.client(st.uri)
    (run,) = c.search_runs([st.writer.experiment_id], filter_string=C.tag_equals((C.Tag.KIND, "trial"), (C.Tag.STRATEGY, s["strategy"]),
                                                                                   (C.Tag.PHASE, s["phase"])))
    return run, {name: sorted((m.step, m.value) for m in c.get_metric_history(run.info.run_id, name)) for name in run.data.metrics}


def test_contract_splits_trial_metrics_into_curves_and_final_values():
    assert not set(C.EPOCH_METRICS) & set(C.FINAL_METRICS)
    assert C.EPOCH_METRICS[0] == C.Metric.TRAIN_NLL  # the plain data loss first
    assert C.Metric.BEST_VAL_ACC in C.FINAL_METRICS and C.Metric.TRAIN_SECONDS in C.EPOCH_METRICS
    assert all(C.is_metric(n) for n in (*C.EPOCH_METRICS, *C.FINAL_METRICS))
    assert C.is_epoch_metric("width_l0") and C.is_epoch_metric("rate_head") and C.is_epoch_metric(C.Metric.VAL_ACC)
    assert not any(C.is_epoch_metric(n) for n in (*C.FINAL_METRICS, *C.TRUNCATION, "width_", "epoch"))


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_trainer_records_hold_only_names_the_contract_places(model):
    """Every number in a trainer's epoch record is a curve of the contract or a final value (the
    callback logs the curves only): a new key must be declared, or it would not reach MLflow."""
    records = []
    Trainer(TrainConfig.from_dict({**spec(model)["config"], "epochs": 2})).run(on_epoch=records.append)
    numbers = {k for r in records for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert C.Metric.TRAIN_NLL in numbers and C.Metric.BEST_VAL_ACC in numbers
    undeclared = {k for k in numbers if k != "epoch" and not C.is_epoch_metric(k) and k not in C.FINAL_METRICS}
    assert not undeclared, sorted(undeclared)


@pytest.mark.parametrize("family,phase", [("fixed", "selection"), ("awnn", "selection"), ("awnn", "assessment")])
def test_trial_run_has_a_curve_per_epoch_and_each_final_value_once(store, family, phase):
    s = spec(family, phase)
    _trial, result = train(store.tracker, s)
    run, h = histories(store, s)
    assert result.epochs_run == EPOCHS
    curves = {n for n in h if C.is_epoch_metric(n)}
    finals = set(h) - curves
    assert C.Metric.TRAIN_NLL in curves and C.Metric.TRAIN_LOSS in curves and {"width_total", "width_l0"} <= curves
    assert (C.Metric.TRAIN_PRIOR in curves and "rate_l0" in curves) == (family == "awnn")
    for name in curves:  # one value per epoch, step = epoch
        assert [step for step, _ in h[name]] == list(range(1, EPOCHS + 1)), name
    assert finals <= set(C.FINAL_METRICS), finals - set(C.FINAL_METRICS)
    expected = {C.Metric.BEST_VAL_ACC, C.Metric.BEST_VAL_LOSS, C.Metric.BEST_EPOCH, C.Metric.EPOCHS_RUN, C.Metric.N_TRAIN, C.Metric.FINAL_WIDTH_TOTAL,
                C.Metric.COMPUTE_SECONDS, C.Metric.DEVICE_HOURS, C.Metric.WALL_DEVICE_HOURS, C.Metric.GPU_HOURS, C.Metric.ATTEMPTS, C.Metric.RETRIES}
    assert expected <= finals and (C.Metric.TEST_ACC in finals) == (phase == "assessment")
    for name in finals:  # once, at the last epoch: beside the curves' ends, not at step 0
        assert [step for step, _ in h[name]] == [EPOCHS], (name, h[name])
    # the values are the trainer's: the running best and the training time are not logged per epoch, and agree
    assert h[C.Metric.BEST_VAL_ACC] == [(EPOCHS, result.best_val_acc)] and h[C.Metric.EPOCHS_RUN] == [(EPOCHS, EPOCHS)]
    assert run.data.metrics[C.Metric.TRAIN_SECONDS] == pytest.approx(result.train_seconds)
    assert [v for _, v in h[C.Metric.TRAIN_NLL]] == pytest.approx([r["train_nll"] for r in result.history])
    # the description says which is which, for this model
    note = run.data.tags[C.MlflowTag.NOTE]
    assert "`train_nll`" in note and ("`train_prior`" in note) == (family == "awnn") and "`best_val_acc`" in note.split("One value")[1]


def test_stopped_and_interrupted_runs_log_their_final_values_at_their_last_epoch(store):
    """A trial stopped by a scheduler whose last report came from inside the next epoch, and one in
    flight when the driver stops: their cost and best score sit at their last epoch, not at step 0."""
    stopped = spec("fixed")
    train(store.tracker, stopped, until=2)
    run, h = histories(store, stopped)
    assert run.data.tags[C.Tag.STATUS] == "stopped"
    assert [s for s, _ in h[C.Metric.VAL_ACC]] == [1, 2]
    for name in (C.Metric.BEST_VAL_ACC, C.Metric.DEVICE_HOURS, C.Metric.COMPUTE_SECONDS, C.Metric.ATTEMPTS):
        assert [s for s, _ in h[name]] == [2], (name, h[name])
    assert [s for s, _ in h[C.Metric.TRAIN_SECONDS]] == [1, 2]  # the curve only: its partial third epoch is in compute_seconds
    assert h[C.Metric.COMPUTE_SECONDS][0][1] > h[C.Metric.TRAIN_SECONDS][-1][1]

    open_ = spec("awnn")
    trial = SimpleNamespace(config={"spec": open_}, last_result={}, error_file=None, error_msg="")
    store.tracker.on_trial_start(0, [], trial)
    records = []
    Trainer(TrainConfig.from_dict({**open_["config"], "epochs": 2})).run(on_epoch=records.append)
    store.tracker.on_trial_result(0, [], trial, {"epoch": 2, "attempt": "a1", "attempt_start_seconds": 0.0, "train_seconds": records[-1]["train_seconds"],
                                                 "epochs": records, "final": None})
    store.tracker.interrupt_open()
    run, h = histories(store, open_)
    assert run.data.tags[C.Tag.STATUS] == "interrupted"
    assert [s for s, _ in h[C.Metric.DEVICE_HOURS]] == [2] and [s for s, _ in h[C.Metric.WIDTH_TOTAL]] == [1, 2]
    assert C.Metric.BEST_VAL_ACC not in h  # no running best per epoch: an interrupted run has no final score


def test_a_trial_that_trained_no_epoch_gets_its_training_time_once(store):
    s = spec("awnn")
    trial = SimpleNamespace(config={"spec": s}, last_result={}, error_file=None, error_msg="")
    store.tracker.on_trial_start(0, [], trial)
    final = {"status": "failed", "error": "RuntimeError: the model cannot be built", "train_seconds": 0.0, "epochs_run": 0}
    store.tracker.on_trial_result(0, [], trial, {"epoch": 0, "epochs": [], "status": "failed", "best_val_acc": math.nan, "final": final})
    store.tracker.on_trial_complete(0, [], trial)
    run, h = histories(store, s)
    assert h[C.Metric.TRAIN_SECONDS] == [(0, 0.0)] and not any(C.is_epoch_metric(n) for n in h if n != C.Metric.TRAIN_SECONDS)


def test_docs_list_each_trial_metric_where_it_is_logged():
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "tracking.md").read_text().split())
    per_epoch = text.split("**Per-epoch metrics**")[1].split("**Final metrics**")[0]
    final = text.split("**Final metrics**")[1].split("`tracking/contract.py` lists both sets")[0]
    assert not [n for n in C.EPOCH_METRICS if f"`{n}`" not in per_epoch]
    assert not [n for n in C.FINAL_METRICS if f"`{n}`" not in final]
