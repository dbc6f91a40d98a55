"""The fast paths of an AWNN training step against plain references: the
whole-network autograd node, the batched width check, the resize shortcuts."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from awnn.distributions import rho_from_rate
from awnn.layers import ACTIVATIONS, AdaptiveMLP, MaxWidthReached


def make_mlp(activation="relu", hidden_layers=3, seed=0, in_features=3, rates=(0.25, 0.4, 0.6), renorm=False):
    torch.manual_seed(seed)
    model = AdaptiveMLP(in_features, 2, hidden_layers=hidden_layers, rate=0.3, quantile_k=0.9, activation=activation,
                        renormalise_importances=renorm).double()
    with torch.no_grad():
        for ctrl, rate in zip(model.widths_ctrl, rates):
            ctrl.rho.fill_(rho_from_rate(rate))
    model.update_width()
    return model


def plain_forward(model: AdaptiveMLP, params: dict, x: torch.Tensor) -> torch.Tensor:
    """Eq. 14 with plain torch ops (no custom autograd functions); with the
    model's renormalise_importances, f is replaced by (f + 1e-6) / sum(f + 1e-6)."""
    act = ACTIVATIONS[model.activation]
    h, f = x, None
    n = model.hidden_layers
    for l in range(n + 1):
        w, b = params[f"layers.{l}.weight"], params[f"layers.{l}.bias"]
        h = (h if f is None else h * f) @ w.T + b
        if l < n:
            h = act(h)
            rate = F.softplus(params["rho"][l])
            j = torch.arange(h.shape[-1], dtype=h.dtype)
            f = torch.exp(-rate * j) - torch.exp(-rate * (j + 1))
            if model.renormalise_importances:
                f = (f + 1e-6) / (f + 1e-6).sum()
    return h


@pytest.mark.parametrize("renorm", [False, True], ids=["paper-text", "renormalised"])
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("batch_shape", [(2,), (40,), (3, 5)], ids=["rescale-activations", "rescale-weights", "sequence"])
def test_fused_forward_and_gradients_match_plain_autograd(activation, batch_shape, renorm):
    model = make_mlp(activation, renorm=renorm)
    assert model.widths == [10, 6, 4]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*batch_shape, 3, generator=g, dtype=torch.float64, requires_grad=True)
    out = model(x)
    grad_out = torch.randn(out.shape, generator=g, dtype=torch.float64)
    (out * grad_out).sum().backward()

    leaves = {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}
    x_ref = x.detach().clone().requires_grad_()
    ref = plain_forward(model, leaves, x_ref)
    (ref * grad_out).sum().backward()
    assert out.shape == ref.shape == (*batch_shape, 2)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-10, atol=1e-13)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, leaves[name].grad, rtol=1e-9, atol=1e-13, msg=name)
        assert p.grad.shape == p.shape, name


def test_fused_forward_without_grad_gives_the_same_outputs():
    model = make_mlp()
    x = torch.randn(7, 3, dtype=torch.float64)
    with_grad = model(x)
    with torch.no_grad():
        without = model(x)
    assert torch.equal(with_grad.detach(), without)


def test_fused_forward_follows_width_changes():
    """The cached index views follow the width: grads keep the new shapes."""
    model = make_mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(9, 3, dtype=torch.float64)
    for widths in ([10, 6, 4], [12, 3, 4], [5, 8, 1], [30, 30, 30]):
        model.set_widths(widths, opt)
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        for layer in model.layers:
            assert layer.weight.grad.shape == layer.weight.shape
        j, j1 = model.widths_ctrl[0].index_views()
        assert torch.equal(j, torch.arange(widths[0], dtype=torch.float64))
        assert torch.equal(j1, torch.arange(1, widths[0] + 1, dtype=torch.float64))
    # back to earlier widths (the cached index vectors of that combination), then another dtype
    for widths in ([12, 3, 4], [10, 6, 4]):
        model.set_widths(widths, opt)
        params = {n: p.detach().clone() for n, p in model.named_parameters()}
        torch.testing.assert_close(model(x), plain_forward(model, params, x), rtol=1e-12, atol=1e-14)
    model.float()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = model(x.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, plain_forward(model, params, x.float()))


def test_update_width_gives_each_layers_target_width_and_cap():
    """The one-pass width update agrees with AdaptiveWidth.target_width per layer."""
    torch.manual_seed(0)
    model = AdaptiveMLP(3, 2, hidden_layers=4, rate=0.3, quantile_k=0.9, max_width=40)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        with torch.no_grad():
            for ctrl in model.widths_ctrl:
                ctrl.rho.fill_(float(torch.empty(()).uniform_(-5.0, 2.0, generator=g)))
        expected = [ctrl.target_width() for ctrl in model.widths_ctrl]
        newly_capped = any(c and not ctrl.capped for (_, c), ctrl in zip(expected, model.widths_ctrl))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            capped = model.update_width(opt)
        assert any(issubclass(w.category, MaxWidthReached) for w in caught) == newly_capped
        assert model.widths == [d for d, _ in expected]
        assert capped == any(c for _, c in expected)
        assert [ctrl.capped for ctrl in model.widths_ctrl] == [c for _, c in expected]
        assert [tuple(l.weight.shape) for l in model.layers] == list(zip(model.widths + [2], [3] + model.widths))


def test_update_width_without_change_touches_nothing():
    model = make_mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3, dtype=torch.float64)).sum().backward()
    opt.step()
    views = [l.weight.data.data_ptr() for l in model.layers]
    state = {id(p): {k: v for k, v in opt.state[p].items()} for p in model.parameters()}
    assert model.update_width(opt) is False
    assert [l.weight.data.data_ptr() for l in model.layers] == views
    for p in model.parameters():
        assert all(opt.state[p][k] is v for k, v in state[id(p)].items())


@pytest.mark.parametrize("renorm", [False, True], ids=["paper-text", "renormalised"])
def test_fused_importances_at_extreme_rates_match_plain_autograd(renorm):
    """log f_j = rho - softplus(rho) (j + 1) stays accurate for a rate of 40
    (one neuron, f_0 ~ 1) and for a tiny rate capped at max_width."""
    torch.manual_seed(0)
    model = AdaptiveMLP(3, 2, hidden_layers=2, rate=0.3, quantile_k=0.9, max_width=60, renormalise_importances=renorm).double()
    with torch.no_grad():
        model.widths_ctrl[0].rho.fill_(rho_from_rate(40.0))
        model.widths_ctrl[1].rho.fill_(rho_from_rate(1e-3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MaxWidthReached)
        model.update_width()
    assert model.widths == [1, 60]
    x = torch.randn(5, 3, dtype=torch.float64)
    model(x).sum().backward()
    leaves = {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}
    ref = plain_forward(model, leaves, x)
    ref.sum().backward()
    torch.testing.assert_close(model(x), ref, rtol=1e-12, atol=1e-14)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, leaves[name].grad, rtol=1e-9, atol=1e-13, msg=name)


@pytest.mark.parametrize("batch", [2, 40], ids=["rescale-activations", "rescale-weights"])
def test_renormalised_fused_path_matches_the_modules_plain_path(batch):
    """The fused node against the model's own unfused path (AdaptiveWidth.importance
    + F.linear, taken for activations the fused node does not know)."""
    model = make_mlp("relu", renorm=True)
    x = torch.randn(batch, 3, dtype=torch.float64)
    out = model(x)
    out.pow(2).sum().backward()
    fused = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model._act = lambda z: F.relu(z)  # not ACTIVATIONS["relu"]: forward takes the plain path
    plain = model(x)
    plain.pow(2).sum().backward()
    torch.testing.assert_close(out, plain, rtol=1e-12, atol=1e-14)
    for name, p in model.named_parameters():
        torch.testing.assert_close(fused[name], p.grad, rtol=1e-9, atol=1e-13, msg=name)
    assert fused["rho"].abs().min() > 0  # the rates do receive gradient through p
