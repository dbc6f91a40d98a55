"""The GPU path (#19): width moves keep optimiser state bit for bit on CUDA,
checkpoints resume bit-identically on CUDA (the CUDA generator draws new
neurons), the training step's host syncs.  GPU-hours of a real sweep are
in tests/system/test_gpu_ray.py.

Every test here needs a CUDA device and is skipped cleanly without one
(CI has none); run them with `pytest -m gpu` on a GPU machine."""
from __future__ import annotations

import io
import warnings

import pytest
import torch
import torch.nn.functional as F

from awnn.config import TrainConfig
from awnn.layers import AdaptiveMLP
from awnn.train import Trainer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CUDA = torch.device("cuda")
STATE_KEYS = {"adam": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",)}


def _model_and_optimizer(optimizer: str):
    torch.manual_seed(0)
    model = AdaptiveMLP(2, 3, hidden_layers=2, rate=0.3, quantile_k=0.9).to(CUDA)  # widths [8, 8]
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, foreach=True)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        x = torch.randn(16, 2, generator=g).to(CUDA)
        y = torch.randint(0, 3, (16,), generator=g).to(CUDA)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("new_widths", [[12, 10], [5, 3], [11, 4]], ids=["grow", "shrink", "mixed"])
def test_cuda_width_move_keeps_weights_and_optimizer_state_bit_for_bit(optimizer, new_widths):
    model, opt = _model_and_optimizer(optimizer)
    keys = STATE_KEYS[optimizer]
    before = {n: (p.detach().clone(), {k: opt.state[p][k].clone() for k in keys}) for n, p in model.named_parameters() if "rho" not in n}
    model.set_widths(new_widths, opt)
    assert model.widths == new_widths
    for name, p in model.named_parameters():
        if "rho" in name:
            continue
        assert p.is_cuda
        old_w, old_state = before[name]
        keep = tuple(slice(0, min(a, b)) for a, b in zip(old_w.shape, p.shape))
        assert torch.equal(p.detach()[keep], old_w[keep]), name
        for k in keys:
            state = opt.state[p][k]
            assert state.is_cuda and state.shape == p.shape, (name, k)
            assert torch.equal(state[keep], old_state[k][keep]), (name, k)
            fresh = torch.ones_like(state, dtype=torch.bool)
            fresh[keep] = False
            assert not state[fresh].any(), (name, k)  # new entries start from zero state
    # and the optimiser still steps the resized parameters on the GPU
    x, y = torch.randn(16, 2, device=CUDA), torch.randint(0, 3, (16,), device=CUDA)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _tiny_task():
    import numpy as np

    from awnn.data import TensorTask, outer_inner_splits
    from awnn.data.tabular import make_tabular

    x, y = make_tabular("spiral", 0)
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), 120, replace=False) for c in (0, 1)])
    x, y = x[idx], y[idx]
    outer, inner = outer_inner_splits(y, seed=0)
    return TensorTask("spiral", torch.from_numpy(x), torch.from_numpy(y).long(), outer, inner)


def _config(**changes) -> TrainConfig:
    # grow_init normal: new neurons are drawn by the CUDA generator at every growth
    return TrainConfig.from_dict({"task": "spiral", "batch_size": 32, "rate": 0.05, "epochs": 3, "device": "cuda", **changes})


@pytest.mark.parametrize("changes", [{}, {"optimizer": "sgd", "hidden_layers": 2}], ids=["adam", "sgd-2-layers"])
def test_cuda_checkpoint_resume_is_bit_identical_to_uninterrupted_run(changes):
    task = _tiny_task()
    full = Trainer(_config(epochs=6, **changes), task)
    full.run()
    first = Trainer(_config(epochs=3, **changes), task)
    first.run()
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    torch.cuda.manual_seed(12345)  # another process would start from another CUDA generator state
    resumed = Trainer(_config(epochs=6, **changes), task)
    resumed.load_state_dict(state)
    resumed.run()
    grew = any(b["width_total"] > a["width_total"] for a, b in zip(full.history[2:], full.history[3:]))
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("train_seconds", "gpu_mem_mib")} for r in h]  # noqa: E731
    assert strip(resumed.history) == strip(full.history), f"widths grew after the checkpoint: {grew}"
    for k, v in full.model.state_dict().items():
        if torch.is_tensor(v):
            assert torch.equal(resumed.model.state_dict()[k], v), k


def _syncs(fn) -> list[str]:
    """Host-device synchronisations `fn` makes (CUDA sync debug mode, 'warn'):
    where each was called from."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # (the first use also warns that the debug mode is a prototype: not a sync)
    return [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if "called a synchronizing" in str(w.message)]


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_cuda_training_step_makes_no_host_sync_besides_the_width_read(model):
    """The step (forward, ELBO, backward, weight prior, Adam) never waits for the
    GPU; an AWNN's width update reads its rates once (one sync), which exact
    width-at-every-step semantics need (see README, GPU)."""
    task = _tiny_task()
    trainer = Trainer(_config(model=model, hidden_layers=2, width=16, epochs=1), task)
    prior = trainer.rate_prior(1)
    x, y = next(trainer.task.batches("inner", "train", 32, CUDA, torch.Generator().manual_seed(0)))
    for _ in range(3):  # warm-up: lazy state, capacity buffers
        trainer.update_widths()
        trainer.train_step(x, y, prior)
    assert _syncs(lambda: trainer.train_step(x, y, prior)) == []
    assert len(_syncs(trainer.update_widths)) == (1 if model == "awnn" else 0)


def test_cuda_tabular_data_stays_on_the_device():
    """Tabular tasks copy their data to the GPU once; batches are slices of it."""
    task = _tiny_task()
    gen = torch.Generator().manual_seed(0)
    batches = list(task.batches("inner", "train", 32, CUDA, gen))
    assert all(x.is_cuda and y.is_cuda for x, y in batches)
    x_all, _ = task.tensors("inner", "train", CUDA)
    assert task.tensors("inner", "train", CUDA)[0] is x_all  # cached, not copied again


@pytest.mark.parametrize("changes", [{}, {"hidden_layers": 3}, {"optimizer": "sgd", "hidden_layers": 2}], ids=["adam-1-layer", "adam-3-layers", "sgd-2-layers"])
def test_cuda_dense_buffers_give_the_reference_trajectory_and_fast_optimizer_route(monkeypatch, changes):
    """On CUDA the capacity buffers are dense (awnn/optim.py, DENSE_VIEWS 'auto'),
    so Adam's multi-tensor kernels take their fast route; the run must be
    bit for bit the run with the strided reference layout."""
    import awnn.optim as optim

    task = _tiny_task()
    runs = []
    for dense in (False, "auto"):
        monkeypatch.setattr(optim, "DENSE_VIEWS", dense)
        t = Trainer(_config(epochs=4, **changes), task)
        t.run()
        runs.append(t)
    ref, fast = runs
    assert len({r["width_total"] for r in ref.history}) > 1
    assert all(p.is_contiguous() for p in fast.model.parameters())
    assert not all(p.is_contiguous() for p in ref.model.parameters())
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("train_seconds", "gpu_mem_mib")} for r in h]  # noqa: E731
    assert strip(fast.history) == strip(ref.history)
    for (k, a), b in zip(ref.model.state_dict().items(), fast.model.state_dict().values()):
        if torch.is_tensor(a):
            assert torch.equal(a, b), k


@pytest.mark.parametrize("adam", [{}, {"fused": True}], ids=["adam-step-on-host", "adam-fused-step-on-device"])
def test_cuda_optimizer_reset_in_place_equals_dropping_the_state(adam):
    """The `authors` reset path on CUDA (awnn/optim.py, reset_optimizer_state):
    the resized layers' Adam state becomes zeroed views of kept buffers, zeroed in
    one call over tensors that may sit on two devices (Adam keeps its step on the
    host unless fused); training on must equal popping the state, bit for bit."""
    models, opts = [], []
    for reset in (True, False):
        torch.manual_seed(0)
        m = AdaptiveMLP(2, 2, hidden_layers=2, rate=0.3, reset_optimizer_on_resize=reset).to(CUDA)
        models.append(m)
        opts.append(torch.optim.Adam(m.parameters(), lr=0.01, **adam))
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randn(16, 2, generator=gen).to(CUDA) for _ in range(8)]
    for i, widths in enumerate(([9, 5], [6, 7], [6, 7], [11, 3])):
        for m, opt in zip(models, opts):
            for x in batches[2 * i:2 * i + 2]:
                opt.zero_grad()
                m(x).pow(2).sum().backward()
                opt.step()
            dims = [2, *widths, 2]
            changed = [l for l in range(3) if tuple(m.layers[l].weight.shape) != (dims[l + 1], dims[l])]
            torch.manual_seed(3)  # (both models draw the same new neurons, on the host or the GPU)
            m.set_widths(widths, opt)
            if not m.reset_optimizer_on_resize:
                for l in changed:
                    opt.state.pop(m.layers[l].weight, None)
                    opt.state.pop(m.layers[l].bias, None)
            else:
                for l in changed:
                    st = opt.state[m.layers[l].weight]
                    assert st["exp_avg"].is_cuda and st["exp_avg"].shape == m.layers[l].weight.shape
                    assert not st["exp_avg"].any() and not st["exp_avg_sq"].any() and float(st["step"]) == 0.0
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters()):
        assert a.is_cuda and torch.equal(a, b), name
    assert float(opts[1].state[models[1].rho]["step"]) == 8.0  # the rates' state is never reset


def test_cuda_every_trainer_path_records_its_peak_gpu_memory_every_epoch():
    """gpu_mem_mib (tracking/contract.py) in every epoch record of every path a
    GPU trial trains in: until 2026-12-04 a fused group's (the GPU default) had
    none, so a sweep's fused trials logged no GPU memory (tests/system/test_gpu_ray.py)."""
    from train_helpers import every_trainer_path

    for path, history in every_trainer_path("cuda").items():
        assert len(history) >= 2, path
        for record in history:
            assert record.get("gpu_mem_mib", 0.0) > 0, (path, record)
