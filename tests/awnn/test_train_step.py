"""The adaptive MLP's written-out step (awnn/train_step.py, issue #30) against
autograd, its reference: one step's loss, logits and every gradient (priors'
included), and whole training runs; where it does not apply, autograd's
step is taken.  Tolerances as in tests/awnn/test_stacked_grad.py."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from awnn.config import TrainConfig
from awnn.fused import PriorGrads
from awnn.layers import AdaptiveMLP
from awnn.models import build_model
from awnn.train import Trainer
from awnn.train_step import applies, step_gradients
from train_helpers import F64_TOL, config, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

pytestmark = pytest.mark.usefixtures("one_thread")

MODELS = [
    {},  # the authors' profile: renormalised importances, uniform bias
    {"awnn_profile": "paper-text", "hidden_layers": 3},
    {"activation": "gelu", "hidden_layers": 2},
    {"activation": "tanh", "renormalise_importances": False},
]
PRIORS = [None, PriorGrads(weight_decay=0.01, rate_mean=0.05, rate_scale=0.3)]


def model_and_batch(dtype, changes, batch=27):
    task = tiny_task()
    torch.manual_seed(0)
    model = build_model(config(**changes), task).to(dtype)
    model.set_widths([w + 5 * i for i, w in enumerate(model.widths)])  # differing widths
    g = torch.Generator().manual_seed(1)
    return model, torch.randn(batch, 2, generator=g, dtype=dtype), torch.randint(0, 2, (batch,), generator=g)


def autograd_step(model, x, y, priors):
    model.zero_grad(set_to_none=True)
    out = model(x) if priors is None else model(x, prior_grads=priors)
    loss = F.cross_entropy(out, y)
    loss.backward()
    return loss.detach(), out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("priors", PRIORS, ids=["no-priors", "priors-in-the-node"])
@pytest.mark.parametrize("changes", MODELS, ids=["authors", "paper-text-3-layers", "gelu-2-layers", "tanh-plain-importances"])
def test_one_step_gives_autograds_loss_logits_and_gradients(changes, priors):
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, None)):
        model, x, y = model_and_batch(dtype, changes)
        assert applies(model)
        ref_loss, ref_out, ref = autograd_step(model, x, y, priors)
        for p in model.parameters():
            p.grad = torch.full_like(p, 9.0)  # replaced, not added to
        loss, out = step_gradients(model, x, y, priors)
        assert torch.equal(out, ref_out)
        for name, p in model.named_parameters():
            assert p.grad.shape == p.shape and p.grad.is_contiguous(), name
            diff = float((p.grad - ref[name]).abs().max())
            bound = tol if tol is not None else 1e-5 * float(ref[name].abs().max()) + 1e-12
            assert diff <= bound, (name, diff)
        assert abs(float(loss) - float(ref_loss)) <= (tol or 1e-6)
        assert max(float(g.abs().max()) for g in ref.values()) > 1e-3


def test_where_it_does_not_apply():
    task = tiny_task()
    assert not applies(build_model(config(model="fixed", width=8), task))
    assert not applies(build_model(config(scale_free_weights=True), task))
    model = build_model(config(), task)
    assert isinstance(model, AdaptiveMLP) and applies(model)
    model._act = lambda z: torch.relu(z)  # an activation the fused node does not know: forward takes plain autograd
    assert not model.fused_forward() and not applies(model)


def _float64(task):
    return dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})


@pytest.mark.parametrize("changes", [{}, {"hidden_layers": 2, "rate_prior": "gaussian", "rate_prior_mean": 0.05, "rate_prior_std": 0.2},
                                     {"scale_free_weights": True}, {"awnn_profile": "paper-text", "rate_prior": "gaussian",
                                                            "rate_prior_mean": 0.05, "rate_prior_std": 0.2}],
                         ids=["authors", "authors-rate-prior-2-layers", "scale-free-autograd", "paper-text-autograd-rate-prior"])
def test_whole_runs_agree_with_autograds_step_in_float64(changes, monkeypatch):
    """Widths moving, the authors' resets, the priors: the same run as with
    autograd's step (both with the lean Adam).  scale_free and paper-text's
    autograd rate prior take autograd's step: there the runs are the same bit for bit."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task = _float64(tiny_task())
        runs = []
        for written in (True, False):
            monkeypatch.setattr(Trainer, "written_out_step", written)
            t = Trainer(config(epochs=6, **changes), task)
            t.run()
            runs.append(t)
    finally:
        torch.set_default_dtype(old)
    mine, ref = runs
    exact = "scale_free_weights" in changes or changes.get("awnn_profile") == "paper-text"
    assert len({r["width_total"] for r in ref.history}) > 1
    tol = 0.0 if exact else F64_TOL
    for a, b in zip(mine.history, ref.history):
        assert a["width_total"] == b["width_total"] and a["val_acc"] == b["val_acc"]
        for k in ("train_loss", "train_nll", "val_loss"):
            assert abs(a[k] - b[k]) <= tol, (a["epoch"], k, a[k], b[k])
    for (k, a), b in zip(mine.model.state_dict().items(), ref.model.state_dict().values()):
        if torch.is_tensor(a) and a.is_floating_point():
            assert float((a - b).abs().max()) <= tol, k


def test_lean_false_is_autograds_step_and_torch_adam():
    t = Trainer(config(), tiny_task(), lean=False)
    assert not t._written_out and type(t.optimizer) is torch.optim.Adam
    t = Trainer(config(), tiny_task())
    assert t._written_out
