"""Ray Tune swallows an Exception raised in a hook for a trial's end
(`TuneController.stop_trial` logs it and goes on); `past_tune` makes it end
the run (tracking/hooks.py).  One real local Ray and Tuner: the first test
shows the swallowing the decorator exists for (if a Ray release stops
swallowing, it fails and the decorator may go)."""
from __future__ import annotations

import pytest

from search.tune import tune_environment
from tracking.hooks import DriverBug, past_tune

pytestmark = pytest.mark.slow


def _trainable(config):
    from ray import tune

    tune.report({"score": config["x"]})


@pytest.fixture(scope="module")
def local_ray():
    tune_environment()
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="CRITICAL", object_store_memory=96 * 1024 * 1024)
    try:
        yield
    finally:
        ray.shutdown()


def _fit(tmp_path, callback):
    import sys

    import ray.cloudpickle
    from ray import tune

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (the workers cannot import this test module)

    tuner = tune.Tuner(_trainable, param_space={"x": tune.grid_search([1, 2, 3])},
                       run_config=tune.RunConfig(storage_path=str(tmp_path), name="hooks", callbacks=[callback], verbose=0))
    return tuner.fit()


class _Ends:
    def __init__(self):
        from ray.tune import Callback

        class Hook(Callback):
            ended: list = []

            def on_trial_complete(self, iteration, trials, trial, **info):
                self.ended.append(trial.config["x"])
                if len(self.ended) == 1:
                    raise RuntimeError("the driver's bookkeeping of a trial's end failed")
        self.cls = Hook


def test_without_it_tune_swallows_the_error_and_runs_on(local_ray, tmp_path):
    hook = _Ends().cls()
    results = _fit(tmp_path, hook)  # no exception reaches the caller
    assert len(results) == 3 and len(hook.ended) == 3


def test_with_it_the_error_ends_the_run_with_its_cause(local_ray, tmp_path):
    cls = _Ends().cls
    cls.on_trial_complete = past_tune(cls.on_trial_complete)
    hook = cls()
    with pytest.raises(DriverBug) as e:
        _fit(tmp_path, hook)
    assert isinstance(e.value.__cause__, RuntimeError)
    assert "on_trial_complete raised RuntimeError: the driver's bookkeeping of a trial's end failed" in str(e.value)
    assert len(hook.ended) == 1  # nothing ran on past it


def test_it_passes_results_and_other_exceptions_through():
    @past_tune
    def ok(x):
        return x + 1

    @past_tune
    def interrupted():
        raise KeyboardInterrupt  # (a BaseException: Ctrl-C's path, not a bug)

    assert ok(1) == 2
    with pytest.raises(KeyboardInterrupt):
        interrupted()
