"""kaiming+ (paper Theorem 3.1, Fig. 2) against plain kaiming."""
import math

import pytest
import torch

from awnn.init import fill_, init_std
from awnn.layers import AdaptiveMLP


def activation_variances(init: str, distribution: str = "gaussian", seed: int = 0) -> list[float]:
    """Var of the ReLU responses alpha^l (before rescaling by f) of a 5-layer AWNN MLP."""
    torch.manual_seed(seed)
    model = AdaptiveMLP(64, 2, hidden_layers=5, rate=0.01, quantile_k=0.9, init=init, init_distribution=distribution)
    assert model.widths == [231] * 5
    x = torch.randn(2000, 64)
    h, f, out = x, None, []
    with torch.no_grad():
        for l, ctrl in enumerate(model.widths_ctrl):
            alpha = torch.relu(model.layers[l](h if f is None else h * f))  # Eq. 17
            out.append(float(alpha.var()))
            h, f = alpha, ctrl.importance()
    return out


@pytest.mark.parametrize("distribution", ["gaussian", "uniform"])
def test_kaiming_plus_keeps_activation_variance_across_five_layers(distribution):
    for seed in range(3):
        var = activation_variances("kaiming+", distribution, seed)
        assert all(v > 0 for v in var)
        ratios = [v / var[0] for v in var]
        assert all(0.25 < r < 4.0 for r in ratios), ratios


def test_kaiming_collapses_activation_variance_across_five_layers():
    var = activation_variances("kaiming")
    plus = activation_variances("kaiming+")
    assert var[0] == pytest.approx(plus[0])  # the first layer sees the raw input: same init
    # each later layer multiplies the variance by about sum f^2 / D ~ 2e-5 (Fig. 2)
    assert var[1] / var[0] < 1e-3
    assert var[4] < 1e-12 * var[0]
    assert all(b <= a for a, b in zip(var, var[1:]))


def test_init_std_values():
    assert init_std("kaiming", 50, None) == pytest.approx(math.sqrt(2 / 50))
    assert init_std("kaiming+", 50, None) == pytest.approx(math.sqrt(2 / 50))  # raw inputs: plain kaiming
    assert init_std("kaiming", 50, 0.004) == pytest.approx(math.sqrt(2 / 50))
    assert init_std("kaiming+", 50, 0.004) == pytest.approx(math.sqrt(2 / 0.004))
    with pytest.raises(ValueError, match=r"Could not resolve init 'he' among choices \['kaiming', 'kaiming\+'\]"):
        init_std("he", 50, 0.1)


def test_adaptive_mlp_kaiming_plus_weights_have_the_theorem_std():
    torch.manual_seed(0)
    model = AdaptiveMLP(2, 2, hidden_layers=2, rate=0.01, quantile_k=0.9, init="kaiming+")
    sq = model.widths_ctrl[0].importance_sq_sum()
    f = model.widths_ctrl[0].importance().detach().double()
    assert sq == pytest.approx(float((f**2).sum()), rel=1e-6)
    w = model.layers[1].weight.detach()  # fed by adaptive layer 0: 231 x 231 draws
    assert float(w.std()) == pytest.approx(math.sqrt(2 / sq), rel=0.02)
    assert float(model.layers[0].weight.detach().std()) == pytest.approx(1.0, rel=0.15)  # sqrt(2/fan_in=2)
    assert (model.layers[1].bias.detach() == 0).all()


@pytest.mark.parametrize("distribution", ["gaussian", "uniform"])
def test_fill_draws_requested_std(distribution):
    t = fill_(torch.empty(200_000), 0.3, distribution, generator=torch.Generator().manual_seed(0))
    assert float(t.std()) == pytest.approx(0.3, rel=0.01)
    assert abs(float(t.mean())) < 0.005
    if distribution == "uniform":
        assert float(t.abs().max()) <= math.sqrt(3) * 0.3


def test_fill_rejects_unknown_distribution():
    with pytest.raises(ValueError, match=r"Could not resolve distribution 'laplace' among choices \['gaussian', 'uniform'\]"):
        fill_(torch.empty(3), 1.0, "laplace")
