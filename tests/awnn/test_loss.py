"""The ELBO objective (paper Eq. 13) and its gradients, checked by hand."""
import math

import pytest
import torch
import torch.nn.functional as F

from awnn.layers import AdaptiveMLP
from awnn.loss import RatePrior, elbo_loss, gaussian_log_prob_sum, squared_sum

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def normal(mean, std):
    """A float64 Normal (python floats would make its scale float32)."""
    return torch.distributions.Normal(torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64))


def tiny_model(hidden_layers=1, rate=0.7, seed=0, prior_on_readout=False):
    torch.manual_seed(seed)
    # rate 0.7, k 0.9: D = ceil(ln 10 / 0.7) = 4 neurons per layer.
    return AdaptiveMLP(3, 2, hidden_layers=hidden_layers, rate=rate, quantile_k=0.9, activation="relu", prior_on_readout=prior_on_readout).double()


def batch(m=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, 3, generator=g, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1][:m])


@pytest.mark.parametrize("readout", [False, True], ids=["adaptive-layers", "with-readout"])
def test_elbo_loss_gradient_matches_hand_computation(readout):
    """p(theta) on the adaptive layer (default), or on the read-out too."""
    model = tiny_model(prior_on_readout=readout)
    assert model.widths == [4]
    x, y = batch()
    n_train, sigma, prior = 40, 1.7, RatePrior(mean=0.3, std=0.5)
    loss, parts = elbo_loss(model(x), y, [model], n_train, sigma, prior)
    loss.backward()

    with torch.no_grad():
        l1, l2 = model.layers
        w1, b1, w2, b2, rho = l1.weight, l1.bias, l2.weight, l2.bias, model.widths_ctrl[0].rho
        m = len(y)
        rate = math.log1p(math.exp(float(rho)))
        j = torch.arange(4, dtype=torch.float64)
        f = torch.exp(-rate * j) - torch.exp(-rate * (j + 1))  # Eq. 12
        df_drate = -j * torch.exp(-rate * j) + (j + 1) * torch.exp(-rate * (j + 1))
        drate_drho = 1.0 / (1.0 + math.exp(-float(rho)))  # softplus' = sigmoid
        pre = x @ w1.T + b1  # (M, D)
        a = pre.clamp_min(0)
        h = a * f  # Eq. 14
        z = h @ w2.T + b2  # (M, C)
        p = torch.softmax(z, 1)
        onehot = F.one_hot(y, 2).double()
        theta = [w1, b1, w2, b2] if readout else [w1, b1]
        decay2 = 1.0 / (sigma**2 * n_train) if readout else 0.0  # d(-log p)/dw / w for the read-out
        count = sum(t.numel() for t in theta)
        sq = sum(float((t * t).sum()) for t in theta)
        ce = float(-(onehot * torch.log(p)).sum(1).mean())
        neg_log_p_theta = 0.5 * sq / sigma**2 + count * (math.log(sigma) + LOG_SQRT_2PI)
        neg_log_p_rate = 0.5 * (rate - prior.mean) ** 2 / prior.std**2 + math.log(prior.std) + LOG_SQRT_2PI
        expected = ce + (neg_log_p_theta + neg_log_p_rate) / n_train

        dz = (p - onehot) / m
        g_w2 = dz.T @ h + w2 * decay2
        g_b2 = dz.sum(0) + b2 * decay2
        dh = dz @ w2
        g_f = (dh * a).sum(0)
        g_rate = float((g_f * df_drate).sum()) + (rate - prior.mean) / (prior.std**2 * n_train)
        g_rho = g_rate * drate_drho
        dpre = dh * f * (pre > 0)
        g_w1 = dpre.T @ x + w1 / (sigma**2 * n_train)
        g_b1 = dpre.sum(0) + b1 / (sigma**2 * n_train)

    assert float(loss.detach()) == pytest.approx(expected, rel=1e-12)
    assert float(parts["nll"]) == pytest.approx(ce, rel=1e-12)
    assert float(parts["log_prior_theta"]) == pytest.approx(-neg_log_p_theta / n_train, rel=1e-12)
    assert float(parts["log_prior_rate"]) == pytest.approx(-neg_log_p_rate / n_train, rel=1e-12)
    for got, want in [(w1.grad, g_w1), (b1.grad, g_b1), (w2.grad, g_w2), (b2.grad, g_b2)]:
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert float(model.rho.grad[0]) == pytest.approx(g_rho, rel=1e-9)
    assert float(model.rho.grad[0]) != 0.0


@pytest.mark.parametrize("readout", [False, True], ids=["adaptive-layers", "with-readout"])
def test_elbo_loss_deep_gradients_match_plain_autograd_reference(readout):
    """Two hidden layers, both rescaling paths of the forward pass, against a
    reference written with plain torch ops (no custom autograd functions)."""
    model = tiny_model(hidden_layers=2, prior_on_readout=readout)
    x, y = batch()
    n_train, sigma, prior = 25, 0.9, RatePrior(0.1, 2.0)
    loss, _ = elbo_loss(model(x), y, [model], n_train, sigma, prior)
    loss.backward()

    leaves = [p.detach().clone().requires_grad_() for p in model.parameters()]
    named = dict(zip([n for n, _ in model.named_parameters()], leaves))
    h, f = x, None
    for l in range(2):
        w, b = named[f"layers.{l}.weight"], named[f"layers.{l}.bias"]
        h = torch.relu((h if f is None else h * f) @ w.T + b)
        rate = F.softplus(named["rho"][l])
        j = torch.arange(h.shape[1], dtype=torch.float64)
        f = torch.exp(-rate * j) - torch.exp(-rate * (j + 1))
    logits = (h * f) @ named["layers.2.weight"].T + named["layers.2.bias"]
    theta = [named[f"layers.{l}.{k}"] for l in range(3 if readout else 2) for k in ("weight", "bias")]
    rates = F.softplus(named["rho"])
    ref = (
        F.cross_entropy(logits, y)
        - sum(normal(0.0, sigma).log_prob(t).sum() for t in theta) / n_train
        - normal(prior.mean, prior.std).log_prob(rates).sum() / n_train
    )
    ref.backward()
    torch.testing.assert_close(loss.detach(), ref.detach(), rtol=1e-12, atol=0)
    for (name, p), leaf in zip(model.named_parameters(), leaves):
        torch.testing.assert_close(p.grad, leaf.grad, rtol=1e-9, atol=1e-12, msg=name)


def test_elbo_loss_without_blocks_is_plain_cross_entropy():
    logits = torch.randn(6, 3)
    y = torch.tensor([0, 1, 2, 2, 1, 0])
    loss, parts = elbo_loss(logits, y, [], n_train=100, sigma_theta=1.0, rate_prior=RatePrior(0.0, 1.0))
    assert torch.equal(loss, F.cross_entropy(logits, y))
    assert set(parts) == {"nll"}


def test_elbo_loss_uninformative_priors_leave_only_the_likelihood():
    model = tiny_model()
    x, y = batch()
    loss, parts = elbo_loss(model(x), y, [model], n_train=10, sigma_theta=None, rate_prior=RatePrior())
    assert torch.equal(loss, F.cross_entropy(model(x), y))
    assert "log_prior_theta" not in parts and "log_prior_rate" not in parts


def test_elbo_loss_regularisers_scale_with_one_over_n():
    model = tiny_model()
    x, y = batch()
    out = model(x)
    prior = RatePrior(0.2, 0.3)
    small, p_small = elbo_loss(out, y, [model], 100, 1.0, prior)
    large, p_large = elbo_loss(out, y, [model], 400, 1.0, prior)
    reg_small = float(small.detach() - p_small["nll"])
    reg_large = float(large.detach() - p_large["nll"])
    assert reg_small == pytest.approx(4 * reg_large, rel=1e-12)
    assert reg_small != 0.0


def test_gaussian_log_prob_sum_matches_torch_distribution():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    want = normal(0.0, 0.7).log_prob(x).sum()
    got = gaussian_log_prob_sum(x.pow(2).sum(), 3, 0.7)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def test_squared_sum_value_and_gradient():
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    s = squared_sum([a, b])
    torch.testing.assert_close(s, a.pow(2).sum() + b.pow(2).sum())
    s.backward()
    torch.testing.assert_close(a.grad, 2 * a.detach())
    torch.testing.assert_close(b.grad, 2 * b.detach())
