"""The stacked trainer's written-out gradient (awnn/stacked_grad.py, issue #30)
against autograd, its reference: one step's losses, logits and gradients for
every activation, mixed and padded stacks, partial batches; and whole runs.
Tolerances: float64 1e-12 for one step (a few roundings of the
cross-entropy's gradient in another order), F64_TOL for runs (the reasoning
at the top of tests/awnn/test_stacked.py); float32 one step within
GRAD_RTOL of each gradient's scale."""
import dataclasses

import pytest
import torch

import awnn.stacked_grad as stacked_grad
from awnn.activations import ACTIVATIONS
from awnn.layers import FixedMLP
from awnn.stacked import StackedMLP, StackedTrainer, _cross_entropy
from awnn.stacked_grad import forward_backward, supported
from train_helpers import F64_TOL, fixed_config, one_thread, task, task64, tiny_task  # noqa: F401 - fixtures

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.filterwarnings("ignore:grad and param do not obey")]  # the reference path's (awnn/stacked.py)
GRAD_RTOL = 1e-5  # float32, one step (tests/awnn/test_stacked.py)


def stack(dtype, activations, widths, depth):
    models = []
    for i, (act, w) in enumerate(zip(activations, widths)):
        torch.manual_seed(i)
        models.append(FixedMLP(2, 3, hidden_layers=depth, width=w, activation=act).to(dtype))
    return StackedMLP(models)


def autograd_step(model, x, y):
    out = model(x)
    loss = _cross_entropy(out, y).mean(1)
    model.grad.zero_()
    loss.sum().backward()
    return loss.detach(), out.detach(), model.grad.clone()


def data(n, batch, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, batch, 2, generator=g, dtype=dtype) * 2, torch.randint(0, 3, (n, batch), generator=g)


CASES = [([a] * 3, [16, 16, 16]) for a in ACTIVATIONS] + [
    (["relu", "relu", "tanh"], [16, 16, 16]),  # two activation runs
    (["gelu", "leaky_relu", "relu6"], [8, 16, 12]),  # every slice its own activation, padded to the widest
]


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("activations, widths", CASES, ids=["-".join(a) + "-" + "x".join(map(str, w)) for a, w in CASES])
@pytest.mark.parametrize("batch", [32, 27], ids=["full-batch", "partial-batch"])
def test_one_step_gives_autograds_loss_logits_and_gradient(activations, widths, depth, batch):
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, None)):
        model = stack(dtype, activations, widths, depth)
        x, y = data(len(widths), batch, dtype)
        ref_loss, ref_out, ref_grad = autograd_step(model, x, y)
        model.grad.fill_(7.0)  # the written-out step overwrites whatever the buffer held
        loss, out = forward_backward(model, x, y)
        assert torch.equal(out, ref_out)  # the same forward ops
        if tol is None:  # float32: within rounding of each slice's gradient scale
            scale = ref_grad.abs().amax(1, keepdim=True)
            assert bool(((model.grad - ref_grad).abs() <= GRAD_RTOL * scale).all())
            assert torch.allclose(loss, ref_loss, rtol=1e-6, atol=0)
        else:
            assert float((model.grad - ref_grad).abs().max()) <= tol
            assert float((loss - ref_loss).abs().max()) <= tol
        assert float(ref_grad.abs().max()) > 1e-3  # there is a gradient to compare


def test_the_padded_units_stay_exactly_zero():
    model = stack(torch.float32, ["relu", "tanh"], [4, 16], 2)
    x, y = data(2, 32, torch.float32)
    forward_backward(model, x, y)
    w0, w1 = model.weights[0].grad[0], model.weights[1].grad[0]  # slice 0 is 4 wide in a 16-wide stack
    assert bool((w0[:, 4:] == 0).all()) and bool((w1[4:, :] == 0).all()) and bool((w1[:, 4:] == 0).all())
    assert bool((model.biases[0].grad[0, 0, 4:] == 0).all())


@pytest.mark.parametrize("changes", [{}, {"activation": "gelu", "hidden_layers": 3}, {"split": "outer", "weight_decay": 1e-3}])
def test_whole_runs_agree_with_the_autograd_path_in_float64(task64, changes, monkeypatch):
    configs = [fixed_config(seed=s, lr=lr, **changes) for s, lr in ((0, 0.01), (1, 0.05))]
    runs = {}
    for manual in (True, False):
        monkeypatch.setattr(StackedTrainer, "manual_gradients", manual)
        t = StackedTrainer(configs, task64)
        runs[manual] = (t.run(), [t.state_dict(i) for i in range(len(configs))])
    for (ra, wa), (rb, wb) in [(runs[True], runs[False])]:
        for a, b in zip(ra, rb):
            assert [h["val_acc"] for h in a.history] == [h["val_acc"] for h in b.history]
            assert max(abs(x["train_loss"] - y["train_loss"]) for x, y in zip(a.history, b.history)) <= F64_TOL
        for a, b in zip(wa, wb):
            assert max(float((a[k] - b[k]).abs().max()) for k in a) <= F64_TOL


def test_an_activation_without_a_written_out_backward_takes_autograd_bit_for_bit(task, monkeypatch):
    configs = [fixed_config(seed=0)]
    monkeypatch.setattr(StackedTrainer, "manual_gradients", False)
    ref = StackedTrainer(configs, task)
    ref.run()
    monkeypatch.setattr(StackedTrainer, "manual_gradients", True)
    monkeypatch.setattr(stacked_grad, "_FUSED_ACTIVATIONS", {k: v for k, v in stacked_grad._FUSED_ACTIVATIONS.items() if k != "relu"})
    assert not supported(["relu"])
    t = StackedTrainer(configs, task)
    t.run()
    assert all(torch.equal(a, b) for a, b in zip(t.state_dict(0).values(), ref.state_dict(0).values()))


def test_every_activation_has_a_written_out_backward():
    """A new activation falls back to autograd (tested above); this names it, so it gets one."""
    assert supported(list(ACTIVATIONS))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_second_moments_floor_changes_no_number(dtype, monkeypatch):
    """StackedAdam clamps its second moments at `sqrt_floor` before the root
    (the root of exact zeros is slow on some CPUs): the run is the one without
    the clamp, bit for bit, in a net whose dead units keep exact zeros there."""
    import awnn.stacked_adam as stacked

    monkeypatch.setenv("AWNN_LEAN_ADAM", "0")  # the reference step (the fused kernel takes no floor)
    task = tiny_task("doublemoon", 400)
    task = dataclasses.replace(task, x=task.x.to(dtype), _cache={})
    configs = [fixed_config(hidden_layers=4, width=16, lr=0.1, seed=s, activation="relu") for s in (0, 1)]
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        runs = []
        for floor in (True, False):
            if not floor:
                monkeypatch.setattr(stacked, "sqrt_floor", lambda eps: None)
            t = StackedTrainer(configs, task)
            assert (t.optimizer._floor is not None) == floor
            t.run()
            runs.append(t)
    finally:
        torch.set_default_dtype(old)
    assert bool((runs[1].optimizer.exp_avg_sq == 0).any())  # there were exact zeros to clamp
    for i in range(len(configs)):
        a, b = runs[0].state_dict(i), runs[1].state_dict(i)
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert [h["train_loss"] for h in runs[0].result(0).history] == [h["train_loss"] for h in runs[1].result(0).history]


def test_the_floor_is_below_what_eps_rounds_away():
    from awnn.stacked import sqrt_floor

    for dtype in (torch.float32, torch.float64):
        for eps in (1e-8, 1e-6, 1e-3):
            f = sqrt_floor(torch.tensor([[eps], [1e-2]], dtype=dtype))
            e = torch.tensor(eps, dtype=dtype)
            # the worst case, the first step's bias correction: the clamped root vanishes in + eps
            assert float(torch.sqrt(torch.tensor(f, dtype=dtype)) / (1 - 0.999) ** 0.5 + e) == float(e)
    assert sqrt_floor(torch.tensor([[1e-30]])) is None  # its floor would be subnormal: no clamp
