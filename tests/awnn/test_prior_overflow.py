"""A rate prior whose terms overflow float32 ends the run as diverged, on every step path, instead of raising
torch's "value cannot be converted to type float without overflow" out of the step (found by trying
`awnn train --set rate_prior=gaussian --set rate_prior_mean=1e18 --set rate_prior_std=1e-18`)."""
import math

import pytest
import torch

from awnn.arith import saturated
from awnn.train import DIVERGED, Trainer
from train_helpers import config, one_thread, tiny_task  # noqa: F401  (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

# each within TrainConfig's range; the rate prior's gradient (rate - mean) / (std^2 N) ~ 1e18 * 1e36 / N is not
OVERFLOWING = {"rate_prior": "gaussian", "rate_prior_mean": 1e18, "rate_prior_std": 1e-18, "epochs": 2}
SCHEDULED = {"compress_start_epoch": 1, "compress_end_epoch": 2, "compress_rate_mean": 1e18, "compress_std_start": 1e-18,
             "compress_std_end": 1e-18, "epochs": 2}


@pytest.mark.parametrize("path", ["fast", "written-out", "reference"])
@pytest.mark.parametrize("changes", [OVERFLOWING, {**OVERFLOWING, "hidden_layers": 2}, {**OVERFLOWING, "awnn_profile": "paper-text"},
                                     SCHEDULED], ids=["1-layer", "2-layers", "paper-text", "compression-schedule"])
def test_an_overflowing_rate_prior_diverges_the_run_on_every_step_path(monkeypatch, path, changes):
    if path == "written-out":
        monkeypatch.setattr(Trainer, "fast_step", False)
    trainer = Trainer(config(**changes), tiny_task(), lean=path != "reference")
    if path == "fast" and changes is OVERFLOWING:
        assert trainer._fast is not None  # (the case the fast step takes)
    result = trainer.run()
    assert result.status == DIVERGED
    assert not math.isfinite(trainer.history[-1]["train_loss"])


def test_saturated_keeps_what_a_dtype_holds_and_gives_the_overflow_its_sign():
    big = float(torch.finfo(torch.float32).max)
    assert saturated(big, torch.float32) == big and saturated(-1.5, torch.float32) == -1.5
    assert saturated(big * 2, torch.float32) == math.inf and saturated(-big * 2, torch.float32) == -math.inf
    assert saturated(1e300, torch.float64) == 1e300  # float64 holds it
    assert math.isnan(saturated(math.nan, torch.float32))
    # what torch itself refuses without it, and takes with it
    one = torch.ones(1)
    with pytest.raises(RuntimeError, match="overflow"):
        one.add(one, alpha=big * 2)
    assert one.add(one, alpha=saturated(big * 2, torch.float32)).item() == math.inf
