"""The fused AWNN node's host-scalar importances and in-node prior gradients
(issue #30) against plain references: the node's tensor path, plain autograd
of the ELBO's prior terms, and the trainer's own post-backward route.

Tolerances: float64 runs compare to 1e-12 (outputs) and 1e-9 relative
(gradients; sums taken in another order, the importances' normaliser as a
geometric sum); float32 trainer runs to rtol 1e-5, atol 1e-6, as the other
trainer tests."""
import copy

import pytest
import torch
import torch.nn.functional as F

from awnn.config import TrainConfig
from awnn.distributions import rho_from_rate
from awnn.layers import AdaptiveMLP, PriorGrads
from awnn.train import Trainer

from test_step_speed_paths import make_mlp, plain_forward


def tensor_path(model: AdaptiveMLP) -> AdaptiveMLP:
    """The model forced onto the node's tensor path (rho read on no host: a GPU
    whose rates the width update has not read since they changed)."""
    model._host_rhos = lambda rho: None
    return model


def grads_of(model: AdaptiveMLP, x: torch.Tensor, grad_out_seed: int = 1, **kwargs) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    out = model(x, **kwargs)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed), dtype=out.dtype)
    (out * grad_out).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("renorm", [False, True], ids=["paper-text", "renormalised"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_shape", [(2,), (40,), (3, 5)], ids=["rescale-activations", "rescale-weights", "sequence"])
def test_fused_host_constants_match_the_tensor_path(renorm, activation, batch_shape):
    model = make_mlp(activation, renorm=renorm)
    x = torch.randn(*batch_shape, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out, grads = grads_of(model, x)
    ref_out, ref_grads = grads_of(tensor_path(copy.deepcopy(model)), x)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-14)
    for name, g in grads.items():
        torch.testing.assert_close(g, ref_grads[name], rtol=1e-9, atol=1e-13, msg=name)
    assert grads["rho"].abs().min() > 0


def test_fused_host_constants_at_extreme_rates_match_the_tensor_path():
    """A rate of 40 (one neuron, f_0 ~ 1) and a tiny one capped at max_width."""
    torch.manual_seed(0)
    model = AdaptiveMLP(3, 2, hidden_layers=2, rate=0.3, quantile_k=0.9, max_width=60, renormalise_importances=True).double()
    with torch.no_grad():
        model.widths_ctrl[0].rho.fill_(rho_from_rate(40.0))
        model.widths_ctrl[1].rho.fill_(rho_from_rate(1e-3))
    with pytest.warns(Warning):
        model.update_width()
    assert model.widths == [1, 60]
    x = torch.randn(5, 3, dtype=torch.float64)
    out, grads = grads_of(model, x)
    ref_out, ref_grads = grads_of(tensor_path(copy.deepcopy(model)), x)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-14)
    for name, g in grads.items():
        torch.testing.assert_close(g, ref_grads[name], rtol=1e-9, atol=1e-13, msg=name)


@pytest.mark.parametrize("host", [True, False], ids=["host-constants", "tensor-path"])
@pytest.mark.parametrize("renorm", [False, True], ids=["paper-text", "renormalised"])
@pytest.mark.parametrize("prior_on_readout", [False, True])
@pytest.mark.parametrize("batch", [2, 40], ids=["rescale-activations", "rescale-weights"])
def test_fused_prior_grads_match_autograd_of_the_prior_terms(host, renorm, prior_on_readout, batch):
    """prior_grads adds d/dtheta of weight_decay/2 sum theta^2 (the prior's
    parameters only) and d/drho of rate_scale/2 sum (rate - mean)^2."""
    model = make_mlp("relu", renorm=renorm)
    model.prior_on_readout = prior_on_readout
    if not host:
        tensor_path(model)
    priors = PriorGrads(weight_decay=0.3, rate_mean=0.2, rate_scale=0.7)
    x = torch.randn(batch, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    out, grads = grads_of(model, x, prior_grads=priors)

    leaves = {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}
    ref = plain_forward(model, leaves, x)
    grad_out = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=ref.dtype)
    n_prior = len(model.layers) if prior_on_readout else len(model.layers) - 1
    theta = [leaves[f"layers.{l}.{k}"] for l in range(n_prior) for k in ("weight", "bias")]
    rates = F.softplus(leaves["rho"])
    total = (ref * grad_out).sum() + 0.3 / 2 * sum(t.pow(2).sum() for t in theta) + 0.7 / 2 * (rates - 0.2).pow(2).sum()
    total.backward()
    torch.testing.assert_close(out, ref.detach(), rtol=1e-12, atol=1e-14)
    for name, g in grads.items():
        torch.testing.assert_close(g, leaves[name].grad, rtol=1e-9, atol=1e-12, msg=name)
    # the read-out's gradient carries the decay only under prior_on_readout
    _, plain = grads_of(model, x)
    readout = f"layers.{len(model.layers) - 1}.weight"
    assert torch.equal(grads[readout], plain[readout]) != prior_on_readout


def test_fused_prior_grads_need_the_fused_forward():
    model = make_mlp("relu")
    model._act = lambda z: F.relu(z)  # not ACTIVATIONS["relu"]: the plain path
    assert not model.fused_forward()
    with pytest.raises(ValueError, match="prior_grads needs the fused forward"):
        model(torch.randn(2, 3, dtype=torch.float64), prior_grads=PriorGrads(weight_decay=0.1))


@pytest.mark.parametrize("hidden_layers", [1, 2])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_trainer_priors_in_the_fused_backward_match_adding_them_after(hidden_layers, optimizer):
    """The authors' SpiralHard run (weight prior with the read-out, Gaussian rate
    prior): the model's backward adding both priors' gradients gives the
    updates and the reported loss of the trainer adding them after the backward."""
    cfg = TrainConfig.from_dict({"task": "spiralhard", "model": "awnn", "hidden_layers": hidden_layers, "optimizer": optimizer, "lr": 0.01,
                                 "sigma_theta": 1.0, "split": "inner", "rate": 0.02, "device": "cpu"})
    assert cfg.rate_prior == "gaussian" and cfg.prior_on_readout
    fast = Trainer(cfg)
    fast._step_with = None  # the gradients set as .grad, to compare them (Adam taking them directly: tests/awnn/test_lean_adam.py)
    fast._fast = None  # (the general step; the straight-line one: tests/awnn/test_fast_step.py)
    prior = fast.rate_prior(1)
    assert fast._prior_grads(prior, True) is not None  # the model is one AdaptiveMLP: its backward adds the priors
    after = Trainer(cfg, fast.task)
    after.model.load_state_dict(fast.model.state_dict())
    after._model_is_block = False  # the route for blocks inside other models
    after._fast = None
    assert after._prior_grads(prior, True) is None
    batches = list(fast.task.batches("inner", "train", 64, torch.device("cpu"), torch.Generator().manual_seed(1)))[:4]
    losses = {}
    for t in (fast, after):
        torch.manual_seed(5)  # the same draws for the neurons a width update adds
        for x, y in batches:
            t.update_widths()
            losses.setdefault(id(t), []).append(float(t.train_step(x, y, prior)[0]))
    assert losses[id(fast)] == pytest.approx(losses[id(after)], rel=1e-6)
    assert fast.model.widths == after.model.widths
    for (name, a), b in zip(fast.model.named_parameters(), after.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-7), name


@pytest.mark.parametrize("with_priors", [False, True])
def test_fused_transposed_products_match_plain_autograd(with_priors):
    """Two inputs and two classes, as SpiralHard: the read-out (B, 2) and the
    first layer's weight gradient (D, 2) are taken as transposed products."""
    torch.manual_seed(0)
    model = AdaptiveMLP(2, 2, hidden_layers=1, rate=0.05, quantile_k=0.9, renormalise_importances=True, prior_on_readout=True).double()
    assert model.widths[0] >= 8
    priors = PriorGrads(weight_decay=0.3, rate_mean=0.04, rate_scale=0.7) if with_priors else None
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    out, grads = grads_of(model, x, prior_grads=priors)
    leaves = {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}
    ref = plain_forward(model, leaves, x)
    grad_out = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=ref.dtype)
    total = (ref * grad_out).sum()
    if with_priors:
        theta = [p for n, p in leaves.items() if n != "rho"]
        total = total + 0.3 / 2 * sum(t.pow(2).sum() for t in theta) + 0.7 / 2 * (F.softplus(leaves["rho"]) - 0.04).pow(2).sum()
    total.backward()
    torch.testing.assert_close(out, ref.detach(), rtol=1e-12, atol=1e-14)
    for name, g in grads.items():
        torch.testing.assert_close(g, leaves[name].grad, rtol=1e-9, atol=1e-12, msg=name)


def test_width_update_read_of_rho_serves_the_step_until_rho_changes():
    """On a GPU the forward and the rate prior take rho's host values from the
    width update's read (no second device sync) while rho is unchanged."""
    model = make_mlp("relu", renorm=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    rho = model._parameters["rho"]
    with torch.no_grad():
        rho.add_(0.01)  # changed after make_mlp's width update
    assert model._last_read_rhos(rho) is None
    model.update_width(opt)
    assert model._last_read_rhos(rho) == rho.tolist()
    model(torch.randn(4, 3, dtype=torch.float64)).sum().backward()  # a forward and backward leave rho as it is
    assert model._last_read_rhos(rho) == rho.tolist()
    opt.step()  # changes rho in place
    assert model._last_read_rhos(rho) is None
    model.update_width(opt)
    assert model._last_read_rhos(rho) == rho.tolist()
    model.load_state_dict(model.state_dict())  # copied in place
    assert model._last_read_rhos(rho) is None
    model.update_width(opt)
    model.float()  # another tensor
    assert model._last_read_rhos(model._parameters["rho"]) is None
    # a rate projected back to rate_min is written as the tensor's dtype rounds it: not served from the read
    bounded = AdaptiveMLP(3, 2, hidden_layers=1, rate=0.3, rate_min=0.5)
    bounded.update_width()
    assert bounded._last_read_rhos(bounded._parameters["rho"]) is None
    assert F.softplus(bounded._parameters["rho"]).item() == pytest.approx(0.5)
