"""`scale_free_weights` (issue #14, beyond the paper): the weights fed by an
adaptive layer are stored in units of their kaiming+ scale, W = c V.  The
network is the plain one with W = c V (outputs, every gradient of V = c x the
gradient of W, the rates' gradients), at the start and after a growth; only
the optimiser's coordinates change."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from awnn.config import PROFILES, TrainConfig
from awnn.init import init_std
from awnn.layers import AdaptiveMLP
from awnn.train import Trainer

AUTHORS = dict(renormalise_importances=True, width_rule="floor+2", bias_init="uniform")


def _plain_twin(m: AdaptiveMLP) -> AdaptiveMLP:
    """The same network without scale_free: W = c V copied in."""
    r = AdaptiveMLP(m.in_features, m.out_features, hidden_layers=m.hidden_layers, activation=m.activation, **AUTHORS)
    r.set_widths(m.widths)
    with torch.no_grad():
        for a, b, w in zip(r.layers, m.layers, m.effective_weights()):
            a.weight.copy_(w)
            a.bias.copy_(b.bias)
        r.rho.copy_(m.rho)
    return r


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("hidden_layers", [1, 3])
def test_scale_free_is_the_plain_network_with_w_equal_c_v(fused, hidden_layers):
    torch.manual_seed(0)
    m = AdaptiveMLP(3, 4, hidden_layers=hidden_layers, rate=0.05, scale_free=True, **AUTHORS)
    with torch.no_grad():
        m.rho.add_(torch.linspace(-0.5, 0.5, hidden_layers))  # layers with different rates
    r = _plain_twin(m)
    if not fused:  # the reference path of plain autograd ops
        m._act = r._act = lambda z: F.relu(z)
    x = torch.randn(32, 3)
    out, ref = m(x), r(x)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-6)
    (out.square().sum()).backward()
    (ref.square().sum()).backward()
    scales = m.weight_scales()
    assert scales[0] == 1.0 and all(c > 1.0 for c in scales[1:])
    for l, (a, b, c) in enumerate(zip(m.layers, r.layers, scales)):
        assert torch.allclose(a.weight.grad, b.weight.grad * c, rtol=1e-4, atol=1e-6), l
        assert torch.allclose(a.bias.grad, b.bias.grad, rtol=1e-4, atol=1e-6), l
    assert torch.allclose(m.rho.grad, r.rho.grad, rtol=1e-4, atol=1e-7)


def test_scale_free_scales_are_the_kaiming_plus_std_of_the_current_rates():
    m = AdaptiveMLP(2, 2, hidden_layers=2, rate=0.01, scale_free=True, **AUTHORS)
    assert m.widths == [232, 232]
    sq = [c.importance_sq_sum() for c in m.widths_ctrl]
    assert m.weight_scales() == [1.0, math.sqrt(2 / sq[0]), math.sqrt(2 / sq[1])]
    # about sqrt(2 D) for nearly flat importances, 21.5 at D = 232; the exponential makes it smaller
    assert 15 < m.weight_scales()[1] < math.sqrt(2 * 232)
    with torch.no_grad():
        m.rho.fill_(2.0)  # a steep exponential: sum p^2 larger, c smaller
    assert m.weight_scales()[1] < 3


def test_scale_free_starts_and_grows_like_the_plain_network():
    torch.manual_seed(0)
    m = AdaptiveMLP(2, 2, hidden_layers=2, rate=0.01, scale_free=True, **AUTHORS)
    # kaiming+ in W at the start: the stored V has unit std, W = c V has std c
    for l, layer in enumerate(m.layers[1:], start=1):
        assert layer.weight.std().item() == pytest.approx(1.0, rel=0.1)
        assert m.effective_weights()[l].std().item() == pytest.approx(m.weight_scales()[l], rel=0.1)
    # growth with grow_init normal: the new W entries are N(0, 1) as without scale_free, so V's are N(0, 1/c^2)
    m.set_widths([2232, 232])
    c = m.weight_scales()[1]
    new_cols = m.layers[1].weight[:, 232:]
    assert new_cols.std().item() == pytest.approx(1.0 / c, rel=0.05)
    assert (new_cols * c).std().item() == pytest.approx(1.0, rel=0.05)
    # grow_init kaiming+: W's new entries at kaiming+ std, i.e. V's at 1
    k = AdaptiveMLP(2, 2, hidden_layers=2, rate=0.01, scale_free=True, grow_init="kaiming+", **AUTHORS)
    k.set_widths([2232, 232])
    assert k.layers[1].weight[:, 232:].std().item() == pytest.approx(1.0, rel=0.05)
    assert init_std("kaiming+", 2232, k.widths_ctrl[0].importance_sq_sum()) == pytest.approx(k.weight_scales()[1])


def test_scale_free_is_off_in_both_profiles_and_a_recorded_config_key():
    for profile in PROFILES:
        cfg = TrainConfig.from_dict({"task": "spiralhard", "awnn_profile": profile})
        assert cfg.scale_free_weights is False
    cfg = TrainConfig.from_dict({"task": "spiralhard", "scale_free_weights": "true"})
    assert cfg.to_dict()["scale_free_weights"] is True
    assert Trainer(cfg.replace(device="cpu", split="inner")).model.scale_free


def test_scale_free_trains_and_moves_widths():
    """A short run: finite losses, widths move, and the run's W stays the
    plain network's (checked through the outputs of a twin) after resizes."""
    cfg = TrainConfig.from_dict({"task": "spiralhard", "model": "awnn", "epochs": 2, "batch_size": 256, "split": "inner",
                                 "device": "cpu", "scale_free_weights": True, "sigma_theta": 100.0})
    t = Trainer(cfg)
    result = t.run()
    assert result.status == "ok"
    assert all(math.isfinite(r["train_loss"]) for r in t.history)
    m = t.model
    assert m.widths != [232]
    x = torch.randn(16, 2)
    assert torch.allclose(m(x), _plain_twin(m)(x), rtol=1e-5, atol=1e-5)
