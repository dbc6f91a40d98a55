"""Adaptive layers: widths from rates, shrink/grow/truncate, the width cap, eval."""
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from awnn.distributions import rho_from_rate, width_from_rate
from awnn.layers import AdaptiveMLP, AdaptiveWidth, FixedMLP, MaxWidthReached, ResizableLinear, model_widths, resolve_activation


def make_mlp(hidden_layers=2, rate=0.2, seed=0, **kw):
    torch.manual_seed(seed)
    return AdaptiveMLP(2, 3, hidden_layers=hidden_layers, rate=rate, quantile_k=0.9, **kw)


def set_rate(model: AdaptiveMLP, layer: int, rate: float) -> None:
    with torch.no_grad():
        model.widths_ctrl[layer].rho.fill_(rho_from_rate(rate))


def test_adaptive_mlp_starts_at_quantile_width():
    model = make_mlp(rate=0.2)
    assert model.widths == [width_from_rate(0.2, 0.9)] * 2 == [12, 12]
    assert [tuple(l.weight.shape) for l in model.layers] == [(12, 2), (12, 12), (3, 12)]
    assert model(torch.randn(4, 2)).shape == (4, 3)


def test_adaptive_mlp_update_width_follows_rate():
    model = make_mlp(rate=0.2)
    set_rate(model, 0, 0.05)
    set_rate(model, 1, 1.0)
    assert model.update_width() is False
    assert model.widths == [width_from_rate(0.05, 0.9), width_from_rate(1.0, 0.9)] == [47, 3]
    assert [tuple(l.weight.shape) for l in model.layers] == [(47, 2), (3, 47), (3, 3)]


def test_adaptive_mlp_shrink_gives_exactly_the_truncated_network():
    model = make_mlp(rate=0.2)
    x = torch.randn(7, 2)
    keep = [5, 4]
    with torch.no_grad():
        w = [l.weight.clone() for l in model.layers]
        b = [l.bias.clone() for l in model.layers]
        f = [c.importance().clone() for c in model.widths_ctrl]
        # The truncated network built from scratch: same rates, first neurons only.
        small = make_mlp(rate=0.2, seed=1)
        small.set_widths(keep)
        small.load_state_dict({k: v for k, v in model.state_dict().items() if "rho" in k}, strict=False)
        small.layers[0].weight.copy_(w[0][:5])
        small.layers[0].bias.copy_(b[0][:5])
        small.layers[1].weight.copy_(w[1][:4, :5])
        small.layers[1].bias.copy_(b[1][:4])
        small.layers[2].weight.copy_(w[2][:, :4])
        small.layers[2].bias.copy_(b[2])
        assert small.widths == keep
        want = small(x)
        # Eq. 14 by hand (float rounding may differ: same values up to 1e-6)
        h = torch.relu(F.linear(x, w[0][:5], b[0][:5])) * f[0][:5]
        h = torch.relu(F.linear(h, w[1][:4, :5], b[1][:4])) * f[1][:4]
        by_hand = F.linear(h, w[2][:, :4], b[2])

        truncated = model.truncate(keep)
        model.set_widths(keep)
        assert model.widths == truncated.widths == keep
        assert torch.equal(model(x), want)
        assert torch.equal(truncated(x), want)
        torch.testing.assert_close(want, by_hand, rtol=1e-6, atol=1e-6)


def test_adaptive_mlp_truncate_leaves_original_and_freezes_copy():
    model = make_mlp(rate=0.2)
    x = torch.randn(5, 2)
    before = model(x).detach()
    half = model.truncate(0.5)
    assert half.widths == [6, 6]
    assert model.widths == [12, 12]
    assert torch.equal(model(x).detach(), before)
    # the copy never changes width again, whatever its rates say
    set_rate(half, 0, 0.01)
    assert half.update_width() is False
    assert half.widths == [6, 6]
    assert model.truncate(3).widths == [3, 3]
    assert model.truncate([100, 2]).widths == [12, 2]  # never more than the current width
    with pytest.raises(ValueError, match=r"keep fraction must lie in \(0, 1\]"):
        model.truncate(1.5)


def test_adaptive_mlp_grow_keeps_old_weights_and_fills_new_ones():
    model = make_mlp(rate=0.2)
    old = [l.weight.detach().clone() for l in model.layers]
    old_b = [l.bias.detach().clone() for l in model.layers]
    params = list(model.parameters())
    model.set_widths([20, 15])
    assert list(model.parameters()) == params  # same Parameter objects
    w0, w1, w2 = (l.weight.detach() for l in model.layers)
    assert torch.equal(w0[:12], old[0]) and torch.equal(w1[:12, :12], old[1]) and torch.equal(w2[:, :12], old[2])
    # new neurons: rows of their layer and columns of the next are drawn (standard normal), biases zero
    assert w0[12:].abs().sum() > 0 and w1[12:].abs().sum() > 0 and w1[:12, 12:].abs().sum() > 0 and w2[:, 12:].abs().sum() > 0
    assert 0.5 < float(torch.cat([w1[12:].flatten(), w2[:, 12:].flatten()]).std()) < 1.5
    assert torch.equal(model.layers[0].bias.detach()[:12], old_b[0])
    assert (model.layers[0].bias.detach()[12:] == 0).all() and (model.layers[1].bias.detach()[12:] == 0).all()
    assert torch.equal(model.layers[2].bias.detach(), old_b[2])


def test_adaptive_mlp_shrink_then_grow_redraws_dropped_neurons():
    model = make_mlp(hidden_layers=1, rate=0.2)
    old = model.layers[0].weight.detach().clone()
    model.set_widths([4])
    model.set_widths([12])
    w = model.layers[0].weight.detach()
    assert torch.equal(w[:4], old[:4])
    assert not torch.equal(w[4:], old[4:])


def test_adaptive_mlp_width_cap_warns_and_reports():
    model = make_mlp(rate=0.2, max_width=30)
    set_rate(model, 0, 0.01)  # wants 231 neurons
    with pytest.warns(MaxWidthReached, match="max_width=30"):
        assert model.update_width() is True
    assert model.widths == [30, 12]
    assert model.widths_ctrl[0].capped and not model.widths_ctrl[1].capped
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per layer, not at every step
        assert model.update_width() is True
    set_rate(model, 0, 0.2)
    assert model.update_width() is False
    assert model.widths == [12, 12]


def test_adaptive_mlp_starting_above_max_width_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # (the default filter shows a warning once per source line: count them all)
        model = AdaptiveMLP(2, 2, rate=0.01, quantile_k=0.9, max_width=50, hidden_layers=2)
    said = [str(w.message) for w in caught if issubclass(w.category, MaxWidthReached)]
    assert len(said) == 2 and all("max_width=50" in m for m in said), said  # once per layer, not once per reset
    assert model.widths == [50, 50]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert model.update_width() is True  # still reported, warned once


def test_adaptive_width_nan_rate_raises_floating_point_error():
    ctrl = AdaptiveWidth(0.1, 0.9, 100)
    with torch.no_grad():
        ctrl.rho.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="diverged"):
        ctrl.target_width()


@pytest.mark.parametrize("rho", [-800.0, -740.0, float("inf"), float("-inf")])
def test_adaptive_width_rate_out_of_float_range_raises_floating_point_error(rho):
    # softplus(rho) underflows (or D overflows): divergence, not a request for max_width
    ctrl = AdaptiveWidth(0.1, 0.9, 100)
    with torch.no_grad():
        ctrl.rho.fill_(rho)
    with pytest.raises(FloatingPointError, match="the run diverged"):
        ctrl.target_width()


@pytest.mark.parametrize("rho, expected", [(-700.0, (100, True)), (-20.0, (100, True)), (30.0, (1, False)), (1e6, (1, False))])
def test_adaptive_width_extreme_but_finite_rates(rho, expected):
    ctrl = AdaptiveWidth(0.1, 0.9, 100)
    with torch.no_grad():
        ctrl.rho.fill_(rho)
    assert ctrl.target_width() == expected


def test_adaptive_width_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"quantile_k must lie in \(0, 1\), but got quantile_k=1.0"):
        AdaptiveWidth(0.1, 1.0, 10)
    with pytest.raises(ValueError, match="max_width must be at least 1, but got max_width=0"):
        AdaptiveWidth(0.1, 0.9, 0)


def test_adaptive_mlp_forward_and_eval_never_change_widths():
    model = make_mlp(rate=0.2)
    set_rate(model, 0, 0.02)  # the rate now implies another width
    x = torch.randn(9, 2)
    model.eval()
    with torch.no_grad():
        model(x)
    model.train()
    out = model(x)
    out.sum().backward()
    assert model.widths == [12, 12]
    assert tuple(model.layers[0].weight.shape) == (12, 2)


def test_adaptive_mlp_state_dict_carries_widths():
    src = make_mlp(rate=0.2)
    src.set_widths([7, 9])
    dst = make_mlp(rate=0.05, seed=3)  # 47 neurons per layer
    dst.load_state_dict(src.state_dict())
    assert dst.widths == [7, 9]
    x = torch.randn(6, 2)
    assert torch.equal(dst(x), src(x))



def test_adaptive_mlp_rho_is_one_parameter_and_old_state_dicts_still_load():
    """The layers' rho's are one vector parameter (one optimiser tensor);
    `ctrl.rho` is a writable view of its entry; a state dict saved with one
    rho per layer (before the packing) loads into it."""
    src = make_mlp(rate=0.2)
    names = [n for n, _ in src.named_parameters()]
    assert "rho" in names and not any(n.startswith("widths_ctrl.") for n in names)
    assert src.rho.shape == (2,)
    with torch.no_grad():
        src.widths_ctrl[1].rho.fill_(rho_from_rate(0.1))
    assert src.rho[1].item() == pytest.approx(rho_from_rate(0.1))
    assert src.widths_ctrl[1].target_width()[0] == width_from_rate(0.1, src.widths_ctrl[1].quantile_k)
    old = dict(src.state_dict())
    packed = old.pop("rho")
    old.update({f"widths_ctrl.{l}.rho": packed[l].clone() for l in range(2)})
    dst = make_mlp(rate=0.05, seed=3)
    dst.load_state_dict(old)
    assert torch.equal(dst.rho, src.rho)
    x = torch.randn(6, 2)
    assert torch.equal(dst(x), src(x))

@pytest.mark.parametrize(
    "key, shape",
    [("layers.0.weight", (12, 5)), ("layers.0.weight", (15, 2)), ("layers.1.bias", (4,)), ("layers.2.weight", (4, 12))],
    ids=["input-columns", "rows-vs-width", "bias", "output-rows"],
)
def test_adaptive_mlp_state_dict_with_inconsistent_shapes_is_rejected(key, shape):
    src = make_mlp(rate=0.2)
    state = {**src.state_dict(), key: torch.zeros(shape)}
    with pytest.raises(RuntimeError, match=re.escape(f"{key} has shape {tuple(shape)}, but widths [12, 12] need")):
        make_mlp(rate=0.2).load_state_dict(state)


def test_resizable_linear_resize_keeps_parameter_objects():
    layer = ResizableLinear(3, 4)
    w, b = layer.weight, layer.bias
    layer.resize(6, 5, fill_rows=lambda t: t.fill_(1.0), fill_cols=lambda t: t.fill_(2.0))
    assert layer.weight is w and layer.bias is b
    assert layer.weight.shape == (6, 5) and layer.bias.shape == (6,)
    assert (layer.weight.detach()[4:] == 1.0).all() and (layer.weight.detach()[:4, 3:] == 2.0).all()
    assert repr(layer) == "ResizableLinear(in_features=5, out_features=6, bias=True)"


def test_resolve_activation_unknown_lists_choices():
    assert resolve_activation("relu6") is F.relu6
    with pytest.raises(ValueError, match=r"Could not resolve activation 'swish' among choices \['gelu', 'leaky_relu'"):
        resolve_activation("swish")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden_layers": 0}, "hidden_layers must be at least 1"),
        ({"init": "xavier"}, r"Could not resolve init 'xavier' among choices \['kaiming', 'kaiming\+'\]"),
        ({"grow_init": "zeros"}, "Could not resolve grow_init 'zeros'"),
        ({"init_distribution": "cauchy"}, "Could not resolve init_distribution 'cauchy'"),
    ],
)
def test_adaptive_mlp_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveMLP(2, 2, **kwargs)


def test_adaptive_mlp_set_widths_rejects_bad_widths():
    model = make_mlp()
    with pytest.raises(ValueError, match="expected 2 widths, but got 1"):
        model.set_widths([3])
    with pytest.raises(ValueError, match="widths must be at least 1"):
        model.set_widths([3, 0])


def test_fixed_mlp_widths_and_no_width_updates():
    model = FixedMLP(2, 3, hidden_layers=2, width=8)
    assert model.widths == [8, 8] == model_widths(model)
    assert model.update_width() is False
    assert model(torch.randn(4, 2)).shape == (4, 3)
    with pytest.raises(ValueError, match="but got width=-1"):
        FixedMLP(2, 3, width=-1)
