"""The `authors` profile's straight-line step (awnn/fast_step.py) against the
Trainer's general written-out step (awnn/train_step.py + LeanAdam.step_with),
its reference: whole runs in float64 (widths moving, the authors' optimiser
resets on resize, both priors, every branch of the rescaling), one step in
float32, resuming from a checkpoint, the first step and the steps it hands
back, and every case where it must not be taken."""
import dataclasses
import math

import pytest
import torch

from awnn.fast_step import SWITCH, FastStep
from awnn.loss import RatePrior
from awnn.train import Trainer
from train_helpers import F64_TOL, config, needs_checked_torch, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

pytestmark = [pytest.mark.usefixtures("one_thread"), needs_checked_torch]

RUNS = {
    # 1 hidden layer: the read-out rescales its weight's columns (W * p)
    "1-layer": {},
    # 2 layers at batch 32: the hidden layer rescales the activations (a * p), the read-out its weight
    "2-layers-rate-prior": {"hidden_layers": 2, "rate_prior": "gaussian", "rate_prior_mean": 0.05, "rate_prior_std": 0.2},
    "3-layers-leaky-relu": {"hidden_layers": 3, "activation": "leaky_relu", "batch_size": 16},
    # gelu's backward reads the pre-activation (kept), relu6's the output
    "gelu-batch-64": {"activation": "gelu", "batch_size": 64},
    "relu6-no-weight-prior": {"activation": "relu6", "weight_prior": "uninformative", "lr": 0.05},
}


def _float64(task):
    return dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})


def _runs(changes, monkeypatch, dtype=torch.float64, epochs=6):
    """The same run with the fast step and with the general one."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        task = tiny_task()
        if dtype == torch.float64:
            task = _float64(task)
        runs = []
        for fast in (True, False):
            monkeypatch.setattr(Trainer, "fast_step", fast)
            t = Trainer(config(epochs=epochs, **changes), task)
            assert (t._fast is not None) == fast
            t.run()
            runs.append(t)
    finally:
        torch.set_default_dtype(old)
    return runs


@pytest.mark.parametrize("changes", list(RUNS.values()), ids=list(RUNS))
def test_whole_runs_agree_with_the_general_step_in_float64(changes, monkeypatch):
    fast, ref = _runs(changes, monkeypatch)
    # the fast step took every step but the first (Adam has no state before it)
    steps = fast.step
    assert fast._fast.steps == steps - 1 and steps >= 18
    assert len({r["width_total"] for r in ref.history}) > 1  # widths moved
    assert all(p.grad is None for p in fast.model.parameters())  # (the first, general step's .grad cleared)
    for a, b in zip(fast.history, ref.history, strict=True):
        assert a["width_total"] == b["width_total"] and a["val_acc"] == b["val_acc"], a["epoch"]
        for k in ("train_loss", "train_nll", "val_loss", "rate_l0"):
            assert abs(a[k] - b[k]) <= F64_TOL, (a["epoch"], k, a[k], b[k])
    for (k, a), b in zip(fast.model.state_dict().items(), ref.model.state_dict().values(), strict=True):
        if torch.is_tensor(a) and a.is_floating_point():
            assert a.shape == b.shape and float((a - b).abs().max()) <= F64_TOL, k
    for k, a in fast.optimizer.state_dict()["state"].items():
        b = ref.optimizer.state_dict()["state"][k]
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert float((a[name] - b[name]).abs().max()) <= F64_TOL, (k, name)


def test_one_float32_step_agrees_with_the_general_step(monkeypatch):
    """float32: the decay in Adam's kernel rounds in another order (a few ulps)."""
    states = []
    for fast in (True, False):
        monkeypatch.setattr(Trainer, "fast_step", fast)
        torch.manual_seed(0)
        t = Trainer(config(hidden_layers=2), tiny_task())
        x, y = t.task.tensors("inner", "train", torch.device("cpu"))
        prior = t.rate_prior(1)
        for i in range(3):  # the first takes the general step
            t.update_widths()
            loss, out, _, _ = t.train_step(x[i * 32 : (i + 1) * 32], y[i * 32 : (i + 1) * 32], prior)
        states.append((float(loss), [p.detach().clone() for p in t.model.parameters()]))
    (loss_a, pa), (loss_b, pb) = states
    assert abs(loss_a - loss_b) <= 1e-6
    for a, b in zip(pa, pb, strict=True):
        assert float((a - b).abs().max()) <= 1e-6 * max(1.0, float(b.abs().max()))


def test_a_resumed_run_continues_as_the_uninterrupted_one(monkeypatch):
    """A checkpoint (weights, widths, the lean Adam's state) taken between two
    fast steps and loaded into a new Trainer: the fast step rebuilds its Adam
    lists from the loaded state and the run ends where the uninterrupted one does."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task = _float64(tiny_task())
        whole = Trainer(config(epochs=4), task)
        whole.run()
        first = Trainer(config(epochs=2), task)
        first.run()
        second = Trainer(config(epochs=4), task)
        second.load_state_dict(first.state_dict())
        second.run()
    finally:
        torch.set_default_dtype(old)
    assert second._fast.steps > 0
    assert [r["width_total"] for r in second.history] == [r["width_total"] for r in whole.history]
    for (k, a), b in zip(second.model.state_dict().items(), whole.model.state_dict().values(), strict=True):
        if torch.is_tensor(a) and a.is_floating_point():
            assert float((a - b).abs().max()) <= F64_TOL, k


def test_a_rate_out_of_float_range_hands_the_step_back_unchanged():
    t = Trainer(config(), tiny_task())
    x, y = t.task.tensors("inner", "train", torch.device("cpu"))
    prior = t.rate_prior(1)
    t.train_step(x[:32], y[:32], prior)  # the general step makes Adam's state
    assert t._fast(x[:32], y[:32], prior, False) is not None
    before = [p.detach().clone() for p in t.model.parameters()]
    moments = [s["exp_avg"].clone() for s in t.optimizer.state.values()]
    with torch.no_grad():
        t.model.rho.fill_(math.inf)
    assert t._fast(x[:32], y[:32], prior, False) is None
    after = [p.detach() for p in t.model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before[1:], after[1:]))
    assert all(torch.equal(a, s["exp_avg"]) for a, s in zip(moments, t.optimizer.state.values()))


@pytest.mark.parametrize("changes", [
    {"awnn_profile": "paper-text"},  # plain importances, no prior on the read-out, autograd's rate prior
    {"renormalise_importances": False},
    {"prior_on_readout": False},
    {"scale_free_weights": True},
    {"model": "fixed", "width": 8},
    {"optimizer": "sgd"},
    {"lr_schedule": "multistep"},  # a scheduler counts the optimiser's wrapped steps
    {"activation": "tanh", "renormalise_importances": False},
], ids=["paper-text", "plain-importances", "no-readout-prior", "scale-free", "fixed", "sgd", "scheduler", "tanh-plain"])
def test_where_its_case_does_not_hold_the_general_step_is_taken(changes):
    t = Trainer(config(**changes), tiny_task())
    assert t._fast is None
    t.run()  # and trains


def test_the_switches_turn_it_off(monkeypatch):
    assert Trainer(config(), tiny_task())._fast is not None
    assert Trainer(config(), tiny_task(), lean=False)._fast is None
    monkeypatch.setenv(SWITCH, "0")
    assert Trainer(config(), tiny_task())._fast is None
    monkeypatch.delenv(SWITCH)
    monkeypatch.setattr(Trainer, "fast_step", False)
    assert Trainer(config(), tiny_task())._fast is None


def test_an_uninformative_rate_prior_adds_no_term():
    t = Trainer(config(awnn_profile="authors", rate_prior="uninformative"), tiny_task())
    assert t._fast is not None and not t.rate_prior(1).informative
    x, y = t.task.tensors("inner", "train", torch.device("cpu"))
    t.train_step(x[:32], y[:32], t.rate_prior(1))
    loss, _, _, _ = t.train_step(x[32:64], y[32:64], t.rate_prior(1))
    assert t._fast.steps == 1 and float(loss) == float(t.last_nll)
    assert isinstance(FastStep.build(t), FastStep) and RatePrior().informative is False


def test_a_width_move_keeps_the_adam_state_objects_so_the_next_step_checks_nothing_again(monkeypatch):
    """`authors` resets a resized layer's Adam state (awnn/optim.py,
    reset_optimizer_state): within the capacity the state keeps its tensor
    objects, re-pointed at the new shape and zeroed, so the lean Adam's kernel
    lists still hold them and the step after the move takes them as they are
    (no `_moment_fits` check; a rebuild or a refresh would call it)."""
    import awnn.lean_adam as lean_adam

    torch.manual_seed(0)
    t = Trainer(config(), tiny_task())
    x, y = t.task.tensors("inner", "train", torch.device("cpu"))
    prior = t.rate_prior(1)
    for i in range(3):  # Adam has state, the fast step has its lists
        t.train_step(x[i * 32 : (i + 1) * 32], y[i * 32 : (i + 1) * 32], prior)
    model, opt = t.model, t.optimizer
    params = [p for layer in model.layers for p in (layer.weight, layer.bias)]
    width = model.widths[0]
    model._apply_widths([width + 2], opt, model.grow_init)  # the first reset hands out views of kept buffers of that capacity
    t.train_step(x[:32], y[:32], prior)
    before = {id(p): (opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]) for p in params}
    direct = opt.__dict__["_direct"]
    for target in (width + 1, width + 2):  # a shrink and a grow, within the capacity
        model._apply_widths([target], opt, model.grow_init)
        for p in params:
            m, v = opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]
            assert m is before[id(p)][0] and v is before[id(p)][1]
            assert m.shape == p.shape and m.is_contiguous() and not m.any() and not v.any()
        checks = []
        fits = lean_adam._moment_fits
        monkeypatch.setattr(lean_adam, "_moment_fits", lambda *a: checks.append(a) or fits(*a))
        steps = t._fast.steps
        t.train_step(x[:32], y[:32], prior)
        monkeypatch.setattr(lean_adam, "_moment_fits", fits)
        assert t._fast.steps == steps + 1 and not checks  # the fast step, on the lists it held
        assert opt.__dict__["_direct"] is direct
        assert model.widths == [target] and all(bool(torch.isfinite(p).all()) for p in params)
