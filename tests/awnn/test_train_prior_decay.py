"""The trainer applies the ELBO's weight prior as optimiser weight decay;
that must give the same updates as back-propagating the full ELBO."""
from __future__ import annotations

import copy

import pytest
import torch

from awnn.config import TrainConfig
from awnn.loss import elbo_loss
from awnn.train import Trainer


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("prior_on_readout,scale_free", [(False, False), (True, False), (False, True), (True, True)])
def test_trainer_prior_as_decay_matches_full_elbo(optimizer, prior_on_readout, scale_free):
    """scale_free: the prior is on W = c V, so the decay of V is c^2 / (sigma^2 N) per layer."""
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "hidden_layers": 2, "optimizer": optimizer, "lr": 0.01, "device": "cpu",
                                 "sigma_theta": 0.5, "prior_on_readout": prior_on_readout, "split": "inner", "scale_free_weights": scale_free})
    assert fast_model_scale_free(cfg) is scale_free
    fast = Trainer(cfg)
    ref_model = copy.deepcopy(fast.model)
    params = list(ref_model.parameters())
    ref_opt = torch.optim.Adam(params, lr=0.01) if optimizer == "adam" else torch.optim.SGD(params, lr=0.01, momentum=cfg.momentum)
    x, y = next(fast.task.batches("inner", "train", 64, torch.device("cpu"), torch.Generator().manual_seed(1)))
    # the prior terms are divided by n_obs: 2000 in the authors' synthetic configs (the default profile)
    assert fast.n_obs == 2000 != fast.n_train
    assert fast.weight_prior_decay() == pytest.approx(1 / (0.25 * fast.n_obs))
    for _ in range(3):  # several steps: momentum / Adam moments included
        fast.train_step(x, y, fast.rate_prior(1))  # the trainer's own step: prior as decay

        out = ref_model(x)
        loss, _ = elbo_loss(out, y, [ref_model], fast.n_obs, 0.5)
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
    for (name, a), b in zip(fast.model.named_parameters(), ref_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name


def fast_model_scale_free(cfg: TrainConfig) -> bool:
    return Trainer(cfg).model.scale_free


@pytest.mark.parametrize("scale_free", [False, True])
def test_trainer_reports_weight_prior_in_train_loss(scale_free):
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "epochs": 1, "sigma_theta": 0.1, "split": "inner", "device": "cpu",
                                 "hidden_layers": 2, "scale_free_weights": scale_free})
    t = Trainer(cfg)
    value = t.neg_log_weight_prior()
    params = [p for b in t.blocks for p in b.prior_parameters()]
    _, parts = elbo_loss(t.model(t.task.tensors("inner", "train", torch.device("cpu"))[0][:4]), torch.zeros(4, dtype=torch.long), t.blocks, t.n_obs, 0.1)
    assert value == pytest.approx(-float(parts["log_prior_theta"]), rel=1e-5)
    assert value > 0 and sum(p.numel() for p in params) > 0


def test_trainer_n_obs_is_the_training_set_size_in_paper_text():
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "awnn_profile": "paper-text", "split": "inner"})
    t = Trainer(cfg)
    assert t.n_obs == t.n_train == 3600
    assert t.weight_prior_decay() == pytest.approx(1 / t.n_train)


@pytest.mark.parametrize("hidden_layers", [1, 3])
def test_trainer_rate_prior_in_closed_form_matches_the_elbos_autograd(hidden_layers):
    """The authors' SpiralHard rate prior N(0.01, 0.01^2) applied by
    add_rate_prior_grad gives the updates (and the reported loss) of
    back-propagating elbo_loss with the prior."""
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({"task": "spiralhard", "model": "awnn", "hidden_layers": hidden_layers, "lr": 0.01, "sigma_theta": 1.0,
                                 "split": "inner", "rate": 0.02, "device": "cpu"})
    assert (cfg.rate_prior, cfg.rate_prior_mean, cfg.rate_prior_std) == ("gaussian", 0.01, 0.01)
    fast = Trainer(cfg)
    fast._step_with = None  # the gradients set as .grad, to read rho's (Adam taking them directly: tests/awnn/test_lean_adam.py)
    fast._fast = None  # (the general step; the straight-line one: tests/awnn/test_fast_step.py)
    assert fast._rate_prior_closed_form
    ref_model = copy.deepcopy(fast.model)
    ref_opt = torch.optim.Adam(ref_model.parameters(), lr=0.01)
    x, y = next(fast.task.batches("inner", "train", 64, torch.device("cpu"), torch.Generator().manual_seed(1)))
    prior = fast.rate_prior(1)
    for _ in range(3):
        loss_fast, *_ = fast.train_step(x, y, prior)
        out = ref_model(x)
        loss, parts = elbo_loss(out, y, [ref_model], fast.n_obs, 1.0, prior)
        ref_opt.zero_grad()
        loss.backward()
        rho_grad = ref_model.rho.grad.clone()
        ref_opt.step()
        # the reported loss excludes the weight prior (added at the epoch's end), includes the rate prior
        assert float(loss_fast) == pytest.approx(float(parts["nll"] - parts["log_prior_rate"]), rel=1e-5)
        assert float(parts["log_prior_rate"]) != 0.0
    assert fast.model.rho.grad is not None
    torch.testing.assert_close(fast.model.rho.grad, rho_grad, rtol=1e-4, atol=1e-7)
    for (name, a), b in zip(fast.model.named_parameters(), ref_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name
    # (the prior's gradient is large here: the rate 0.02 is one std from its mean 0.01)
    rate = torch.nn.functional.softplus(ref_model.rho.detach())
    assert ((rate - 0.01) * torch.sigmoid(ref_model.rho.detach()) / (1e-4 * fast.n_obs)).abs().min() > 1e-6
