"""awnn/width_update.py's shortcut: a step whose rho stays inside its layer's
checked band skips the full width check.  Against the reference
(`WIDTH_BAND = False`: the full check at every step), over random rho walks
that cross the band edges, for both width rules, with a rate floor and a
width cap, and over whole training runs (bit-identical histories)."""
import math
import warnings

import pytest
import torch

import awnn.width_update as wu
from awnn.distributions import rho_from_rate
from awnn.layers import AdaptiveMLP, MaxWidthReached
from awnn.train import Trainer
from train_helpers import config, one_thread, tiny_task  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(width_rule, rate_min, max_width, seed=0):
    torch.manual_seed(seed)
    return AdaptiveMLP(2, 2, hidden_layers=3, rate=0.05, quantile_k=0.9, width_rule=width_rule, rate_min=rate_min,
                       max_width=max_width).double()


def _edge_rho(width, rule):
    """A rho exactly at a rate where the width rule changes its answer (c / (width - 1), both rules' edge)."""
    c = -math.log1p(-0.9)
    return rho_from_rate(c / (width - 1))


@pytest.mark.parametrize("width_rule", ["ceil", "floor+2"])
@pytest.mark.parametrize("rate_min,max_width", [(0.0, 4096), (0.04, 4096), (0.0, 40)], ids=["plain", "rate-floor", "capped"])
def test_width_band_gives_the_full_checks_widths_on_random_walks(monkeypatch, width_rule, rate_min, max_width):
    fast, ref = _model(width_rule, rate_min, max_width), _model(width_rule, rate_min, max_width)
    g = torch.Generator().manual_seed(3)
    skipped = 0
    for step in range(600):
        kind = step % 50
        with torch.no_grad():
            if kind == 0:  # a jump to an exact edge of one layer's current width
                layer = step // 50 % 3
                w = max(ref.widths[layer], 3)
                new = ref.rho.clone()
                new[layer] = _edge_rho(w, width_rule)
            elif kind == 25:  # a large jump (may cross the rate floor or the cap)
                new = ref.rho + 0.7 * torch.randn(3, generator=g, dtype=torch.float64)
            else:  # small steps: most stay inside the band
                new = ref.rho + 0.0005 * torch.randn(3, generator=g, dtype=torch.float64)
            fast.rho.copy_(new)
            ref.rho.copy_(new)
        calls_before = _count_full_checks(fast)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MaxWidthReached)
            monkeypatch.setattr(wu, "WIDTH_BAND", True)
            got = fast.update_width()
            monkeypatch.setattr(wu, "WIDTH_BAND", False)
            want = ref.update_width()
        skipped += _count_full_checks(fast) == calls_before
        assert got == want, step
        assert fast.widths == ref.widths, step
        assert [c.capped for c in fast.widths_ctrl] == [c.capped for c in ref.widths_ctrl], step
        assert torch.equal(fast.rho, ref.rho), step  # the rate floor's projection, applied alike
    # a layer at its rate floor or its cap has no band (its check must run: projection, cap): fewer skips there
    least = 100 if (rate_min, max_width) == (0.0, 4096) else 1
    assert skipped >= least, f"the band was used at only {skipped} of 600 steps"


def _count_full_checks(model):
    return sum(getattr(c, "_checks", 0) for c in model.widths_ctrl)


@pytest.fixture(autouse=True)
def count_checks(monkeypatch):
    """Count the full width checks (AdaptiveWidth.width_for_rho calls made by update_width)."""
    from awnn.width import AdaptiveWidth
    original = AdaptiveWidth.width_for_rho

    def counted(self, rho):
        self.__dict__["_checks"] = self.__dict__.get("_checks", 0) + 1
        return original(self, rho)

    monkeypatch.setattr(AdaptiveWidth, "width_for_rho", counted)


@pytest.mark.parametrize("profile", ["authors", "paper-text"])
def test_width_band_leaves_a_training_run_bit_identical(monkeypatch, profile):
    task = tiny_task()
    histories = []
    for band in (True, False):
        monkeypatch.setattr(wu, "WIDTH_BAND", band)
        trainer = Trainer(config(model="awnn", hidden_layers=2, awnn_profile=profile, epochs=4), task)
        trainer.run()
        histories.append(([{k: v for k, v in r.items() if "seconds" not in k} for r in trainer.history],
                          {k: v.clone() for k, v in trainer.model.state_dict().items() if isinstance(v, torch.Tensor)}))
    (h_fast, w_fast), (h_ref, w_ref) = histories
    assert h_fast == h_ref
    assert len({r["width_total"] for r in h_ref}) > 1, "the widths never moved: the test would not see a wrong band"
    assert w_fast.keys() == w_ref.keys() and all(torch.equal(w_fast[k], w_ref[k]) for k in w_ref)
