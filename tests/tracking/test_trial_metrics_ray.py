"""Issue #32 item 4 on a real `awnn compare` (Ray, the trial processes'
reports, the driver's callback, MLflow on SQLite): every trial run of the
smoke comparison has its curves once per epoch and its final values once,
at its last epoch."""
from __future__ import annotations

import pytest

from tracking import contract as C


@pytest.mark.slow
def test_every_trial_run_has_curves_per_epoch_and_final_values_once(smoke_comparison):
    c = C.client(smoke_comparison["tracking_uri"])
    exp = c.get_experiment_by_name("awnn-doublemoon")
    trials = c.search_runs([exp.experiment_id], filter_string=C.tag_equals((C.Tag.KIND, "trial")), max_results=1000)
    models = set()
    for r in trials:
        epochs = int(r.data.metrics[C.Metric.EPOCHS_RUN])
        assert epochs >= 1 and r.data.tags[C.Tag.STATUS] == "ok"
        models.add(r.data.params["model"])
        steps = {name: [m.step for m in c.get_metric_history(r.info.run_id, name)] for name in r.data.metrics}
        curves = {n for n in steps if C.is_epoch_metric(n)}
        assert C.Metric.TRAIN_NLL in curves and C.Metric.VAL_ACC in curves and C.Metric.TRAIN_SECONDS in curves
        for name in curves:
            assert sorted(steps[name]) == list(range(1, epochs + 1)), (r.data.tags[C.Tag.TRIAL_KEY], name, steps[name])
        finals = set(steps) - curves - set(C.TRUNCATION)  # (re-training runs' truncation curves: step = % kept)
        assert finals <= set(C.FINAL_METRICS) and {C.Metric.BEST_VAL_ACC, C.Metric.DEVICE_HOURS} <= finals, finals
        for name in finals:
            assert steps[name] == [epochs], (r.data.tags[C.Tag.TRIAL_KEY], name, steps[name])
        assert r.data.tags[C.MlflowTag.NOTE].startswith(("**AWNN trial", "**Fixed-width trial"))
    assert models == {"fixed", "awnn"}
