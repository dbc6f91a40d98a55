"""The Trainer's lean Adam (awnn/lean_adam.py, issue #30): torch's fused CPU
kernel where it computes torch.optim.Adam's update, the reference step
everywhere else, the same state (checkpoints load either way), one switch.

The kernel rounds in another order than torch.optim.Adam's foreach loop, so
runs are compared in float64 (1e-12 per optimiser step sequence, 1e-9 for
whole training runs whose widths depend on the rates), and in float32 at the
few-ulp level a few hundred steps give."""
import dataclasses
import io
import os
import subprocess
import sys

import pytest
import torch

import awnn.lean_adam as lean_adam
from awnn.lean import make_trainer
from awnn.lean_adam import LeanAdam, make_adam
from awnn.train import Trainer
from train_helpers import F64_TOL, config, needs_checked_torch, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

pytestmark = [pytest.mark.usefixtures("one_thread"), needs_checked_torch]

SHAPES = [(7, 3), (3,), (5, 7), (5,), (1,)]  # an MLP's weights and biases, and a rho


def make_params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype)) for s in SHAPES]


def groups(params, decay=0.05):
    """Two groups, as the Trainer's: plain (coupled L2) and adaptive (none)."""
    return [{"params": params[:2], "weight_decay": decay}, {"params": params[2:], "weight_decay": 0.0}]


def drive(opt, params, steps, dtype, seed=1, reset_every=0, skip_every=0):
    """`steps` optimiser steps on seeded gradients; every `skip_every` steps
    the first parameter has no gradient (Adam leaves it), every `reset_every`
    steps the middle parameter's state is zeroed, step included (what the
    authors' profile does to a resized layer), so step counts differ."""
    g = torch.Generator().manual_seed(seed)
    for i in range(1, steps + 1):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=dtype)
        if skip_every and i % skip_every == 0:
            params[0].grad = None
        opt.step()
        if reset_every and i % reset_every == 0:
            torch._foreach_zero_([v for v in opt.state[params[2]].values()])


def max_diff(a, b) -> float:
    return max(float((x - y).detach().abs().max()) for x, y in zip(a, b))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_lean_adam_gives_torch_adams_trajectory_with_decay_skipped_grads_and_reset_state(dtype, tol):
    ref_p, lean_p = make_params(dtype), make_params(dtype)
    ref = torch.optim.Adam(groups(ref_p), lr=0.01, eps=1e-8, foreach=True)
    lean = LeanAdam(groups(lean_p), lr=0.01, eps=1e-8, foreach=True)
    for opt, ps in ((ref, ref_p), (lean, lean_p)):
        drive(opt, ps, 300, dtype, reset_every=37, skip_every=5)
    assert lean.lean_steps == 300  # every step took the kernel
    assert max_diff(lean_p, ref_p) <= tol
    for p, q in zip(lean_p, ref_p):
        a, b = lean.state[p], ref.state[q]
        assert a.keys() == b.keys() and float(a["step"]) == float(b["step"])
        assert a["step"].dtype == b["step"].dtype and a["step"].device == b["step"].device  # torch's CPU foreach layout
        assert max_diff([a["exp_avg"], a["exp_avg_sq"]], [b["exp_avg"], b["exp_avg_sq"]]) <= tol
    assert float(lean.state[lean_p[0]]["step"]) == 240  # 60 steps without a gradient
    assert float(lean.state[lean_p[2]]["step"]) == 300 % 37  # restarted at the last reset


def test_a_state_dict_continues_either_way():
    """LeanAdam's state dict is torch.optim.Adam's (the same groups' flags and
    state layout): each continues the other's run."""
    dtype = torch.float64
    runs = {}
    for first, second in ((torch.optim.Adam, LeanAdam), (LeanAdam, torch.optim.Adam), (torch.optim.Adam, torch.optim.Adam)):
        ps = make_params(dtype)
        a = first(groups(ps), lr=0.01, foreach=True)
        drive(a, ps, 50, dtype, seed=1)
        saved = a.state_dict()
        ps2 = [torch.nn.Parameter(p.detach().clone()) for p in ps]
        b = second(groups(ps2), lr=0.01, foreach=True)
        b.load_state_dict(saved)
        assert b.state_dict()["param_groups"] == saved["param_groups"]
        drive(b, ps2, 50, dtype, seed=2)
        runs[(first, second)] = ps2
    ref = runs[(torch.optim.Adam, torch.optim.Adam)]
    for key, ps in runs.items():
        assert max_diff(ps, ref) <= 1e-12, key


def test_a_strided_tensor_takes_the_reference_step_bit_for_bit_and_nothing_outside_its_view_moves():
    """torch's CPU kernel reads a strided view as dense (it wrote outside a
    capacity buffer's active block on torch 2.14): such a step must be
    torch.optim.Adam's own."""
    dtype = torch.float32
    bufs, opts, params = [], [], []
    for cls in (torch.optim.Adam, LeanAdam):
        buf = torch.randn(10, 12, generator=torch.Generator().manual_seed(3))
        w = torch.nn.Parameter(buf.as_strided((6, 5), (12, 1)))
        b = torch.nn.Parameter(torch.zeros(6))
        assert not w.is_contiguous()
        opt = cls([w, b], lr=0.01, foreach=True)
        bufs.append(buf)
        opts.append(opt)
        params.append([w, b])
    outside = bufs[1].clone()
    for opt, ps in zip(opts, params):
        drive(opt, ps, 40, dtype)
    assert opts[1].lean_steps == 0
    assert all(torch.equal(p, q) for p, q in zip(params[0], params[1]))
    mask = torch.ones(10, 12, dtype=torch.bool)
    mask[:6, :5] = False
    assert torch.equal(bufs[1][mask], outside[mask])


@pytest.mark.parametrize("flags", [{"amsgrad": True}, {"maximize": True}, {"weight_decay": 0.1, "decoupled_weight_decay": True}])
def test_flags_the_kernel_call_does_not_carry_take_the_reference_step(flags):
    dtype = torch.float32
    ref_p, lean_p = make_params(dtype), make_params(dtype)
    ref = torch.optim.Adam(ref_p, lr=0.01, foreach=True, **flags)
    lean = LeanAdam(lean_p, lr=0.01, foreach=True, **flags)
    drive(ref, ref_p, 20, dtype)
    drive(lean, lean_p, 20, dtype)
    assert lean.lean_steps == 0
    assert all(torch.equal(p, q) for p, q in zip(lean_p, ref_p))


def test_a_closure_and_the_optimizer_hooks_work_as_torch_adams():
    ps = make_params(torch.float32)
    opt = LeanAdam(ps, lr=0.01, foreach=True)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))

    def closure():
        opt.zero_grad()
        loss = sum((p * p).sum() for p in ps)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert torch.is_tensor(loss) and calls == ["pre", "post"]  # once each (the reference step is not hooked twice)
    drive(opt, ps, 3, torch.float32)
    assert calls == ["pre", "post"] * 4 and opt.lean_steps == 3


def test_the_switch_turns_the_lean_adam_off():
    ps = make_params(torch.float32)
    assert type(make_adam([{"params": ps}], lr=0.01)) is LeanAdam
    assert type(make_adam([{"params": ps}], lean=False, lr=0.01)) is torch.optim.Adam


# ------------------------------------------------------------- in the Trainer
@pytest.mark.parametrize("changes", [{}, {"awnn_profile": "paper-text", "hidden_layers": 2}, {"model": "fixed", "width": 12, "weight_decay": 0.01}],
                         ids=["awnn-authors", "awnn-paper-text-2-layers", "fixed-weight-decay"])
def test_the_trainer_with_lean_adam_gives_the_reference_run_in_float64(changes):
    """Every step takes the kernel (the capacity buffers are dense on a CPU,
    awnn/optim.py), and the run, widths included, is the reference Trainer's
    (torch.optim.Adam) to float64 rounding, while widths move and the authors'
    profile resets the state of resized layers."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task = tiny_task()
        task = dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})
        runs, results = [], []
        for lean in (True, False):  # (one after the other: a trainer seeds torch's generator, which new neurons draw from)
            runs.append(Trainer(config(epochs=6, **changes), task, lean=lean))
            results.append(runs[-1].run())
    finally:
        torch.set_default_dtype(old)
    lean, ref = runs
    assert type(lean.optimizer) is LeanAdam and type(ref.optimizer) is torch.optim.Adam
    assert lean.optimizer.lean_steps == lean.step > 0
    if lean.blocks:
        assert len({r["width_total"] for r in ref.history}) > 1  # widths moved
    for a, b in zip(lean.history, ref.history):
        assert a["width_total"] == b["width_total"] and a["val_acc"] == b["val_acc"]
        assert abs(a["train_loss"] - b["train_loss"]) <= F64_TOL and abs(a["val_loss"] - b["val_loss"]) <= F64_TOL
    assert results[0].widths == results[1].widths
    for (k, a), b in zip(lean.model.state_dict().items(), ref.model.state_dict().values()):
        if torch.is_tensor(a) and a.is_floating_point():
            assert float((a - b).abs().max()) <= F64_TOL, k


def test_make_trainer_lean_false_is_the_whole_reference():
    """The trial's switch (AWNN_LEAN_TRIALS=0 -> lean=False) turns the lean Adam off too."""
    task = tiny_task()
    assert type(make_trainer(config(), task).optimizer) is LeanAdam
    assert type(make_trainer(config(), task, lean=False).optimizer) is torch.optim.Adam


def test_the_environment_switch_reaches_a_fresh_process():
    code = "from awnn.train import Trainer; from train_helpers import config, tiny_task; print(type(Trainer(config(), tiny_task()).optimizer).__name__)"
    env = {**os.environ, lean_adam.SWITCH: "0", "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "Adam"


def test_lean_adam_calls_the_methods_torch_wraps_to_import_dynamo_without_the_wrapper():
    """`UNWRAPPED`: on this torch each is a `torch._disable_dynamo` wrapper
    (torch/_compile.py) around the method itself; LeanAdam calls the method.
    Fails when a torch release wraps them otherwise (then look again)."""
    for name in lean_adam.UNWRAPPED:
        wrapper = getattr(torch.optim.Optimizer, name)
        assert wrapper.__code__.co_filename.endswith(os.path.join("torch", "_compile.py")), name
        assert wrapper.__wrapped__.__name__ == name and wrapper.__wrapped__.__code__.co_filename.endswith("optimizer.py")
        assert getattr(LeanAdam, name) is not getattr(torch.optim.Adam, name), name
    def made(cls, params):  # two groups, then a third added
        opt = cls(groups(params[:4]), lr=0.01, foreach=True)
        opt.add_param_group({"params": params[4:], "weight_decay": 0.0})
        return opt

    p = make_params(torch.float32)
    opt = made(LeanAdam, p)
    assert [len(g["params"]) for g in opt.param_groups] == [2, 2, 1] and opt.param_groups[2]["lr"] == 0.01
    drive(opt, p, 3, torch.float32)
    opt.zero_grad()
    assert all(q.grad is None for q in p)
    ref = made(torch.optim.Adam, make_params(torch.float32))
    ref.load_state_dict(opt.state_dict())  # (the state dict torch.optim.Adam's own methods read and write)
    again = made(LeanAdam, make_params(torch.float32))
    again.load_state_dict(ref.state_dict())
    for g_old, g_new in zip(opt.param_groups, again.param_groups):
        for a, b in zip(g_old["params"], g_new["params"]):
            assert torch.equal(opt.state[a]["exp_avg_sq"], again.state[b]["exp_avg_sq"]) and int(again.state[b]["step"]) == 3


@pytest.mark.parametrize("switch, imported", [("1", False), ("0", True)], ids=["lean", "reference"])
def test_an_awnn_run_its_checkpoint_and_its_continuation_import_no_dynamo(switch, imported):
    """A trial process never imports torch._dynamo (1.1 CPU-s; search/warm.py
    no longer imports it for the trials): an AWNN training run, its
    checkpoint, a new trainer continuing from it.  With the switch off,
    torch.optim.Adam's own methods import it, as they always did."""
    code = ("import io, sys, torch; from awnn.train import Trainer; from train_helpers import config, tiny_task\n"
            "t = Trainer(config(epochs=2), tiny_task()); t.run(); buf = io.BytesIO(); torch.save(t.state_dict(), buf); buf.seek(0)\n"
            "u = Trainer(config(epochs=3), tiny_task()); u.load_state_dict(torch.load(buf, weights_only=False)); u.run()\n"
            "print(u.epoch, type(u.optimizer).__name__, 'torch._dynamo' in sys.modules)")
    env = {**os.environ, lean_adam.SWITCH: switch, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["3", "LeanAdam" if switch == "1" else "Adam", str(imported)]


def test_quick_step_is_step_without_the_wrapper_and_keeps_hooks_when_there_are_some():
    dtype = torch.float32
    a_p, b_p = make_params(dtype), make_params(dtype)
    a, b = LeanAdam(groups(a_p), lr=0.01, foreach=True), LeanAdam(groups(b_p), lr=0.01, foreach=True)
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        grads = [torch.randn(p.shape, generator=g) for p in a_p]
        for ps in (a_p, b_p):
            for p, gr in zip(ps, grads):
                p.grad = gr.clone()
        a.step()
        b.quick_step()
    assert all(torch.equal(p, q) for p, q in zip(a_p, b_p)) and b.lean_steps == 20
    calls = []
    handle = b.register_step_pre_hook(lambda o, args, kwargs: calls.append(1))
    b.quick_step()
    assert calls == [1]  # a hook: the wrapped step, which runs it
    handle.remove()
    from torch.optim.optimizer import register_optimizer_step_post_hook
    handle = register_optimizer_step_post_hook(lambda o, args, kwargs: calls.append(2))
    try:
        b.quick_step()
    finally:
        handle.remove()
    assert calls == [1, 2]


def test_the_trainer_takes_the_quick_step_unless_a_scheduler_counts_steps():
    task = tiny_task()
    t = Trainer(config(), task)
    assert t._opt_step == t.optimizer.quick_step
    t = Trainer(config(lr_schedule="multistep"), task)
    assert t._opt_step == t.optimizer.step
    t.run()  # (no scheduler warning about the order of optimizer.step and scheduler.step)


def test_steps_reuse_the_last_walk_until_the_state_or_the_gradients_change(monkeypatch):
    """After one full walk (Adam's `_init_group`) the kernel's lists are reused
    while nothing in them changes; a missing gradient, a state dict loaded
    into the same optimiser or a parameter that turns strided sends the step
    back through the walk, and the trajectory stays torch.optim.Adam's."""
    dtype = torch.float64
    walks = []
    real = LeanAdam._init_group
    monkeypatch.setattr(LeanAdam, "_init_group", lambda self, *a: (walks.append(1), real(self, *a))[1])
    ref_p, lean_p = make_params(dtype), make_params(dtype)
    ref = torch.optim.Adam(groups(ref_p), lr=0.01, foreach=True)
    lean = LeanAdam(groups(lean_p), lr=0.01, foreach=True)
    for opt, ps in ((ref, ref_p), (lean, lean_p)):
        drive(opt, ps, 20, dtype, seed=1)
    assert len(walks) == 2  # the first step's, one per group: then the memo
    saved = [lean.state_dict(), ref.state_dict()]
    for opt, ps in ((ref, ref_p), (lean, lean_p)):
        drive(opt, ps, 10, dtype, seed=2, skip_every=4)  # steps 4 and 8 walk (and the steps after them)
    assert 2 < len(walks) <= 2 + 2 * 4
    before = len(walks)
    lean.load_state_dict(saved[0])  # new state tensors: the memo must not write into the old ones
    ref.load_state_dict(saved[1])
    for opt, ps in ((ref, ref_p), (lean, lean_p)):
        drive(opt, ps, 10, dtype, seed=3)
    assert len(walks) == before + 2
    assert lean.lean_steps == 40
    assert max_diff(lean_p, ref_p) <= 1e-12
    for p, q in zip(lean_p, ref_p):
        assert max_diff([lean.state[p]["exp_avg_sq"]], [ref.state[q]["exp_avg_sq"]]) <= 1e-12


# ------------------------------------------------ gradients handed over directly
def one_group(params):
    return [{"params": params, "weight_decay": 0.0}]


def seeded_grads(params, g):
    return [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]


def test_direct_refreshes_replaced_moments_in_place_and_refuses_a_shape_the_state_does_not_have():
    """`direct(params)`: the lists held while nothing changed; moments replaced
    by new tensors of the parameter's shape (a resize) refreshed in place, the
    same lists; a moment of another shape than its parameter (a parameter
    resized without its state), a strided moment or a step hook: no kernel
    step (the kernel checks no shape), and step_with declines."""
    params = make_params(torch.float32)
    lean = LeanAdam(one_group(params), lr=0.01, foreach=True)
    for p in params:
        p.grad = torch.ones_like(p)
    lean.step()
    direct = lean.direct(params)
    assert direct is not None and lean.direct(params) is direct
    st = lean.state[params[1]]
    st["exp_avg"], st["exp_avg_sq"] = st["exp_avg"].clone(), st["exp_avg_sq"].clone()
    again = lean.direct(params)
    assert again is direct and again[2][1] is st["exp_avg"] and again[3][1] is st["exp_avg_sq"]
    grads = [torch.ones_like(p) for p in params]
    assert lean.step_with(params, grads)
    st["exp_avg"] = torch.zeros(params[1].numel() + 3)  # another shape
    assert lean.direct(params) is None and not lean.step_with(params, grads)
    st["exp_avg"] = torch.zeros(params[1].shape[::-1]).t() if params[1].dim() == 2 else torch.zeros(2 * params[1].numel())[::2]
    assert not st["exp_avg"].is_contiguous() and lean.direct(params) is None
    st["exp_avg"] = torch.zeros_like(params[1])
    assert lean.direct(params) is not None
    handle = lean.register_step_pre_hook(lambda *a: None)
    assert lean.direct(params) is None
    handle.remove()
    assert lean.direct(params) is not None


def test_step_with_gives_torch_adams_trajectory_through_resets_state_dicts_and_replaced_moments():
    """`step_with(params, grads)` (the written-out step's handover: no .grad
    set) is torch.optim.Adam's step on those gradients, to float64 rounding:
    with step counters made views of one buffer, a layer's state reset (its
    count restarts, the others' go on), moments replaced by new tensors (what
    a resize does) and a state dict loaded either way."""
    dtype = torch.float64
    ref_p, lean_p = make_params(dtype), make_params(dtype)
    ref = torch.optim.Adam(one_group(ref_p), lr=0.01, foreach=True)
    lean = LeanAdam(one_group(lean_p), lr=0.01, foreach=True)
    g = torch.Generator().manual_seed(7)

    def both(steps):
        for _ in range(steps):
            grads = seeded_grads(ref_p, g)
            for p, gr in zip(ref_p, grads):
                p.grad = gr.clone()
            ref.step()
            if not lean.step_with(lean_p, [gr.clone() for gr in grads]):
                for p, gr in zip(lean_p, grads):
                    p.grad = gr.clone()
                lean.step()

    both(1)  # no state yet: step_with declines, step() makes it
    assert lean.lean_steps == 1 and lean.__dict__.get("_direct") is None
    both(10)
    assert lean.lean_steps == 11
    counter = lean.__dict__["_direct"][5]
    assert all(lean.state[p]["step"]._base is counter for p in lean_p)  # one increment a step for every counter
    for opt, ps in ((ref, ref_p), (lean, lean_p)):  # what the authors' profile does to a resized layer
        torch._foreach_zero_([v for v in opt.state[ps[2]].values()])
    both(5)
    assert float(lean.state[lean_p[2]]["step"]) == 5.0 and float(lean.state[lean_p[0]]["step"]) == 16.0
    for opt, ps in ((ref, ref_p), (lean, lean_p)):  # a resize hands the moments over as new tensors
        st = opt.state[ps[3]]
        st["exp_avg"], st["exp_avg_sq"] = st["exp_avg"].clone(), st["exp_avg_sq"].clone()
    both(5)
    saved = lean.state_dict()
    ref.load_state_dict(ref.state_dict())
    lean.load_state_dict(saved)  # (new state tensors: the handover must not write into the old ones)
    both(5)
    assert lean.lean_steps == 26
    assert max_diff(lean_p, ref_p) <= 1e-12
    for p, q in zip(lean_p, ref_p):
        assert max_diff([lean.state[p]["exp_avg_sq"]], [ref.state[q]["exp_avg_sq"]]) <= 1e-12
        assert float(lean.state[p]["step"]) == float(ref.state[q]["step"])
    # the state dict written with the counters as views loads into torch.optim.Adam and continues alike
    other_p = [torch.nn.Parameter(p.detach().clone()) for p in lean_p]
    other = torch.optim.Adam(one_group(other_p), lr=0.01, foreach=True)
    buf = io.BytesIO()
    torch.save(lean.state_dict(), buf)  # (a checkpoint's way; a live state dict would share its tensors with `other`)
    buf.seek(0)
    other.load_state_dict(torch.load(buf))
    grads = seeded_grads(other_p, g)
    for p, gr in zip(other_p, grads):
        p.grad = gr.clone()
    other.step()
    assert lean.step_with(lean_p, [gr.clone() for gr in grads])
    assert max_diff(lean_p, other_p) <= 1e-12


def test_step_with_declines_where_it_does_not_apply_and_changes_nothing():
    """Two param groups, a parameter list other than the group's, a step hook,
    a gradient of another shape or a strided one, the switch off: False, and
    neither the parameters nor the state moved (the caller takes `step()`)."""
    dtype = torch.float32
    ps = make_params(dtype)
    g = torch.Generator().manual_seed(3)
    two = LeanAdam(groups(ps), lr=0.01, foreach=True)
    for p, gr in zip(ps, seeded_grads(ps, g)):
        p.grad = gr
    two.step()
    assert not two.step_with(ps, seeded_grads(ps, g))
    one = LeanAdam(one_group(ps), lr=0.01, foreach=True)
    one.step()  # (makes the state)
    before = [p.detach().clone() for p in ps]
    assert not one.step_with(ps[::-1], seeded_grads(ps[::-1], g))  # not the group's order
    handle = one.register_step_pre_hook(lambda o, args, kwargs: None)
    assert not one.step_with(ps, seeded_grads(ps, g))
    handle.remove()
    wrong = seeded_grads(ps, g)
    wrong[1] = torch.randn(3, 7, generator=g).t()  # strided
    assert not one.step_with(ps, wrong)
    wrong[1] = torch.randn(2, generator=g)  # another shape
    assert not one.step_with(ps, wrong)
    assert all(torch.equal(p, q) for p, q in zip(ps, before)) and one.lean_steps == 1
    assert one.step_with(ps, seeded_grads(ps, g)) and one.lean_steps == 2


def test_the_trainer_hands_an_adaptive_mlps_gradients_over_without_setting_grad(monkeypatch):
    """The Trainer's general written-out step (an AdaptiveMLP on a CPU) gives Adam its
    gradients directly: every step after the first is the kernel's through
    `step_with`, no stale .grad is left; the run's equality with the reference
    is test_the_trainer_with_lean_adam_gives_the_reference_run_in_float64.
    (The `authors` profile's straight-line step calls the kernel itself:
    tests/awnn/test_fast_step.py; it leaves no .grad either.)"""
    monkeypatch.setattr(Trainer, "fast_step", False)
    t = Trainer(config(epochs=2), tiny_task())
    assert t._step_with is not None
    calls = []
    real = t._step_with
    t._step_with = lambda params, grads: (calls.append(real(params, grads)), calls[-1])[1]
    t.run()
    assert len(calls) == t.step > 1 and calls[0] is False and all(calls[1:]) and t.optimizer.lean_steps == t.step
    assert all(p.grad is None for p in t.model.parameters())
    assert Trainer(config(), tiny_task(), lean=False)._step_with is None
