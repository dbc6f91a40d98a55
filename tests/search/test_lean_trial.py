"""The switch between the lean loop and the reference Trainer in a trial
(search/trial_common.lean_trials; the trial itself: test_lean_trial_ray.py)."""
import pytest

from search.trial_common import LEAN_SWITCH, lean_trials


@pytest.mark.parametrize("env, setting, expected", [
    (None, None, True),  # on by default
    ("0", None, False),  # AWNN_LEAN_TRIALS=0: the reference Trainer
    ("1", None, True),
    ("0", True, True),  # the trial settings' value wins over the environment
    (None, False, False),
])
def test_lean_trials_switch_reads_settings_then_environment(monkeypatch, env, setting, expected):
    if env is None:
        monkeypatch.delenv(LEAN_SWITCH, raising=False)
    else:
        monkeypatch.setenv(LEAN_SWITCH, env)
    settings = {"cpus_per_trial": 1} if setting is None else {"cpus_per_trial": 1, "lean_trials": setting}
    assert lean_trials(settings) is expected
