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
@pytest.mark.parametrize("prior_on_readout", [False, True])
def test_trainer_prior_as_decay_matches_full_elbo(optimizer, prior_on_readout):
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "hidden_layers": 2, "optimizer": optimizer, "lr": 0.01, "device": "cpu",
                                 "sigma_theta": 0.5, "prior_on_readout": prior_on_readout, "split": "inner"})
    fast = Trainer(cfg)
    ref_model = copy.deepcopy(fast.model)
    params = list(ref_model.parameters())
    ref_opt = torch.optim.Adam(params, lr=0.01) if optimizer == "adam" else torch.optim.SGD(params, lr=0.01, momentum=cfg.momentum)
    x, y = next(fast.task.batches("inner", "train", 64, torch.device("cpu"), torch.Generator().manual_seed(1)))
    assert fast.weight_prior_decay() == pytest.approx(1 / (0.25 * fast.n_train))
    for _ in range(3):  # several steps: momentum / Adam moments included
        fast.train_step(x, y, fast.rate_prior(1))  # the trainer's own step: prior as decay

        out = ref_model(x)
        loss, _ = elbo_loss(out, y, [ref_model], fast.n_train, 0.5)
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
    for (name, a), b in zip(fast.model.named_parameters(), ref_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name


def test_trainer_reports_weight_prior_in_train_loss():
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "epochs": 1, "sigma_theta": 0.1, "split": "inner", "device": "cpu"})
    t = Trainer(cfg)
    value = t.neg_log_weight_prior()
    params = [p for b in t.blocks for p in b.prior_parameters()]
    _, parts = elbo_loss(t.model(t.task.tensors("inner", "train", torch.device("cpu"))[0][:4]), torch.zeros(4, dtype=torch.long), t.blocks, t.n_train, 0.1)
    assert value == pytest.approx(-float(parts["log_prior_theta"]), rel=1e-5)
    assert value > 0 and sum(p.numel() for p in params) > 0
