"""The lean loop in a real trial (issue #30): one real local Ray, the real
trial function (search/trial.py) and the real tracking callback writing to
MLflow on a SQLite file.  The same fixed configs (selection trials, and a
re-training run that keeps its model) run once in the lean loop and once in
the reference Trainer (`lean_trials` off, the switch): every report names
the trainer that ran, checkpoints are written along the way, and the
trial-level outputs agree in float32 up to rounding: the same status,
epochs and selected epoch, scores within a rounding's reach."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from search.protocol import TrialSpec
from search.trial import trainable
from search.tune import RunSettings, trial_settings, tune_environment
from tracking.callback import TrialTracker
from tracking.contract import MODEL_FILE, Tag, client
from tracking.store import TrackingWriter, init_tracking

pytestmark = pytest.mark.slow

BASE = {"task": "doublemoon", "model": "fixed", "optimizer": "adam", "batch_size": 32, "split": "inner", "epochs": 6, "patience": 0,
        "seed": 0, "data_seed": 0, "max_train_examples": 800}
CONFIGS = [  # (phase, config changes)
    ("selection", {"hidden_layers": 1, "width": 16, "activation": "relu", "lr": 0.01}),
    ("selection", {"hidden_layers": 2, "width": 64, "activation": "tanh", "lr": 0.003, "weight_decay": 1e-4}),
    ("selection", {"hidden_layers": 2, "width": 32, "activation": "relu", "lr": 0.05, "patience": 2, "epochs": 10}),
    ("assessment", {"hidden_layers": 1, "width": 32, "activation": "relu", "lr": 0.01, "split": "outer"}),
]
OFFSET = 100  # the reference path's trial keys: the lean one's index + OFFSET


def _specs(offset: int) -> list[TrialSpec]:
    return [TrialSpec(key=f"{'sel' if phase == 'selection' else 'ass'}-{i + offset:04d}", phase=phase, index=i + offset,
                      config={**BASE, **changes}, strategy="fixed", family="fixed") for i, (phase, changes) in enumerate(CONFIGS)]


@pytest.fixture
def local_ray(tmp_path):
    tune_environment()
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR", object_store_memory=96 * 1024 * 1024)
    try:
        yield tmp_path
    finally:
        ray.shutdown()


def test_lean_and_reference_trials_agree_through_ray(local_ray):
    from ray import tune

    uri = f"sqlite:///{local_ray / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    writer.start_run("cmp", name="compare-lean", tags={Tag.KIND: "comparison"})
    for phase in ("selection", "assessment"):
        writer.start_run(f"fixed/{phase}", name=f"fixed-{phase}", parent="cmp", tags={Tag.KIND: "sweep"})
    seen: dict[str, set] = {}  # trial key -> the trainers its reports named
    checkpoints: dict[str, int] = {}

    class Reports(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            key = trial.config["spec"]["key"]
            seen.setdefault(key, set()).add(result.get("trainer"))
            checkpoints[key] = checkpoints.get(key, 0) + (trial.checkpoint is not None)

    for lean, offset in ((True, 0), (False, OFFSET)):
        tracker = TrialTracker(writer, tags={Tag.COMPARISON: "cmp-lean", Tag.TASK: "doublemoon"}, cpus_per_trial=1, gpus_per_trial=0)
        settings = {**trial_settings(RunSettings(cpus_per_trial=1, report_interval=0, checkpoint_interval=0)), "lean_trials": lean}
        tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            param_space={"spec": tune.grid_search([s.to_dict() for s in _specs(offset)]), "settings": settings},
            tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=2, reuse_actors=True),
            run_config=tune.RunConfig(storage_path=str(local_ray / "ray"), verbose=0, callbacks=[tracker, Reports()],
                                      failure_config=tune.FailureConfig(max_failures=0)),
        ).fit()
    assert writer.flush(timeout=60)
    runs = client(uri).search_runs([writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")
    writer.close(timeout=30)
    by_key = {r.data.tags[Tag.TRIAL_KEY]: r for r in runs}
    lean_keys, ref_keys = [s.key for s in _specs(0)], [s.key for s in _specs(OFFSET)]
    assert sorted(by_key) == sorted(lean_keys + ref_keys)
    assert all(seen[k] == {"lean"} for k in lean_keys) and all(seen[k] == {"reference"} for k in ref_keys), seen
    # ... and MLflow shows which loop trained each run
    assert {k: by_key[k].data.tags.get(Tag.TRAINER) for k in lean_keys + ref_keys} == {**{k: "lean" for k in lean_keys}, **{k: "reference" for k in ref_keys}}
    assert all(checkpoints[k] >= 1 for k in lean_keys + ref_keys), checkpoints  # (checkpoint_interval 0: one per report but the final)
    history = MlflowClient(uri).get_metric_history
    for mine_key, ref_key in zip(lean_keys, ref_keys):
        mine, ref = by_key[mine_key].data, by_key[ref_key].data
        assert mine.tags[Tag.STATUS] == ref.tags[Tag.STATUS] == "ok" and by_key[mine_key].info.status == "FINISHED", mine_key
        a, b = mine.metrics, ref.metrics
        # float32 through other kernels (bmm vs mm): the same epochs and selection, scores equal up to rounding
        assert (a["epochs_run"], a["best_epoch"]) == (b["epochs_run"], b["best_epoch"]), mine_key
        assert a["best_val_acc"] == pytest.approx(b["best_val_acc"], abs=1e-9), mine_key
        assert a["best_val_loss"] == pytest.approx(b["best_val_loss"], rel=1e-4), mine_key
        losses = [[h.value for h in sorted(history(r.info.run_id, "train_loss"), key=lambda h: h.step)] for r in (by_key[mine_key], by_key[ref_key])]
        assert len(losses[0]) == len(losses[1]) == a["epochs_run"] and losses[0] == pytest.approx(losses[1], rel=1e-4), mine_key
        assert a["train_seconds"] > 0 and a["device_hours"] > 0
    patience = by_key[lean_keys[2]].data.metrics
    assert patience["epochs_run"] < 10  # the early stop happened on both paths (compared above)
    ass, ass_ref = by_key[lean_keys[3]], by_key[ref_keys[3]]
    assert ass.data.metrics["test_acc"] == pytest.approx(ass_ref.data.metrics["test_acc"], abs=1e-9)
    # the re-training run kept its model, as the Trainer's does
    for r in (ass, ass_ref):
        names = [f.path for f in MlflowClient(uri).list_artifacts(r.info.run_id, "model")]
        assert f"model/{MODEL_FILE}" in names, names
