"""Optimiser-state surgery: growing keeps weights and Adam/SGD state bit for bit."""
import pytest
import torch
import torch.nn.functional as F

from awnn.layers import AdaptiveMLP
from awnn.optim import CapacityBuffer, grow_capacity, resize_optimizer_state
from train_helpers import one_thread  # noqa: F401 - a fixture

STATE_KEYS = {"adam": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",)}


pytestmark = pytest.mark.usefixtures("one_thread")


def make(optimizer: str, seed=0):
    torch.manual_seed(seed)
    model = AdaptiveMLP(2, 3, hidden_layers=2, rate=0.3, quantile_k=0.9)  # widths [8, 8]
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, foreach=True)
    return model, opt


def steps(model, opt, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        x = torch.randn(16, 2, generator=g)
        y = torch.randint(0, 3, (16,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def snapshot(model, opt, keys):
    return {
        name: (p.detach().clone(), {k: opt.state[p][k].clone() for k in keys})
        for name, p in model.named_parameters()
        if "rho" not in name
    }


def assert_prefix_kept(model, opt, before, keys):
    """Old entries bit for bit, new entries of every state zero."""
    for name, p in model.named_parameters():
        if "rho" in name:
            continue
        old_w, old_state = before[name]
        prefix = tuple(slice(0, s) for s in old_w.shape)
        assert torch.equal(p.detach()[prefix], old_w), name
        for k in keys:
            state = opt.state[p][k]
            assert state.shape == p.shape, (name, k)
            assert torch.equal(state[prefix], old_state[k]), (name, k)
            fresh = torch.ones_like(state, dtype=torch.bool)
            fresh[prefix] = False
            assert (state[fresh] == 0).all(), (name, k)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("new_widths", [[10, 9], [40, 33]], ids=["within-capacity", "reallocating"])
def test_resize_optimizer_state_grow_keeps_state_bit_for_bit(optimizer, new_widths):
    model, opt = make(optimizer)
    keys = STATE_KEYS[optimizer]
    steps(model, opt, 60)  # many steps: the state is far from its initial zero
    before = snapshot(model, opt, keys)
    step_before = {id(p): opt.state[p].get("step") for p in model.parameters()}
    model.set_widths(new_widths, opt)
    assert model.widths == new_widths
    assert_prefix_kept(model, opt, before, keys)
    if optimizer == "adam":  # the scalar step count is left alone
        for p in model.parameters():
            assert torch.equal(opt.state[p]["step"], step_before[id(p)])
    # the optimiser keeps working on the new shapes, and its in-place updates
    # land in the buffers the next resize reads from
    steps(model, opt, 25, seed=2)
    before = snapshot(model, opt, keys)
    grown = [w + 20 for w in new_widths]
    model.set_widths(grown, opt)
    assert_prefix_kept(model, opt, before, keys)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_resize_optimizer_state_shrink_then_grow_zeroes_regrown_state(optimizer):
    model, opt = make(optimizer)
    keys = STATE_KEYS[optimizer]
    steps(model, opt, 30)
    before = snapshot(model, opt, keys)
    model.set_widths([3, 5], opt)
    w1 = model.layers[1].weight
    assert w1.shape == (5, 3)
    for k in keys:
        assert torch.equal(opt.state[w1][k], before["layers.1.weight"][1][k][:5, :3])
    model.set_widths([8, 8], opt)  # back to the old shape: the dropped neurons come back fresh
    for k in keys:
        st = opt.state[w1][k]
        assert torch.equal(st[:5, :3], before["layers.1.weight"][1][k][:5, :3])
        assert (st[5:] == 0).all() and (st[:, 3:] == 0).all()
        assert before["layers.1.weight"][1][k][5:].abs().sum() > 0  # (so the zeros are a real reset)


def test_resize_optimizer_state_after_load_state_dict_adopts_state():
    model, opt = make("adam")
    steps(model, opt, 20)
    saved = opt.state_dict()
    model2, opt2 = make("adam")
    model2.load_state_dict(model.state_dict())
    opt2.load_state_dict(saved)  # state tensors are new copies, not views of our buffers
    before = snapshot(model2, opt2, STATE_KEYS["adam"])
    model2.set_widths([12, 11], opt2)
    assert_prefix_kept(model2, opt2, before, STATE_KEYS["adam"])


def test_resize_optimizer_state_before_first_step_is_a_no_op():
    model, opt = make("adam")
    model.set_widths([12, 12], opt)
    assert len(opt.state) == 0
    steps(model, opt, 1)
    assert opt.state[model.layers[1].weight]["exp_avg"].shape == (12, 12)


def test_resize_optimizer_state_keeps_optimizer_param_groups():
    model, opt = make("sgd")
    steps(model, opt, 3)
    params = [p for g in opt.param_groups for p in g["params"]]
    model.set_widths([20, 2], opt)
    assert [p for g in opt.param_groups for p in g["params"]] == params == list(model.parameters())
    assert set(opt.state) == set(model.parameters())


def test_resize_optimizer_state_ignores_none_optimizer():
    p = torch.nn.Parameter(torch.zeros(3))
    resize_optimizer_state(None, p, (3,), (5,), (5,))  # nothing to do, no error


def test_capacity_buffer_grow_and_shrink_keep_leading_slice():
    active = torch.arange(6.0).reshape(2, 3)
    cb = CapacityBuffer(active, (4, 4))
    assert cb.owns(cb.view()) and torch.equal(cb.view(), active)
    view = cb.resize((3, 4), (4, 4), fill_rows=lambda t: t.fill_(-1.0), fill_cols=lambda t: t.fill_(-2.0))
    assert torch.equal(view[:2, :3], active)
    assert (view[2] == -1).all() and (view[:2, 3] == -2).all()
    view = cb.resize((5, 2), (6, 4), fill_rows=lambda t: t.fill_(7.0))  # beyond capacity: re-allocated
    assert cb.capacity == (6, 4)
    assert torch.equal(view[:2], active[:, :2]) and (view[2] == -1).all() and (view[3:] == 7).all()


@pytest.mark.parametrize(
    "needed, current, limit, expected",
    [(5, 4, None, 16), (20, 16, None, 24), (100, 16, None, 100), (40, 32, 40, 40), (50, 32, 40, 50)],
)
def test_grow_capacity_is_geometric_and_respects_limit(needed, current, limit, expected):
    assert grow_capacity(needed, current, limit) == expected


@pytest.mark.parametrize("changes", [{}, {"hidden_layers": 3, "grow_init": "kaiming+", "init_distribution": "uniform"}, {"optimizer": "sgd", "hidden_layers": 2}],
                         ids=["adam-1-layer", "adam-3-layers-kaiming-uniform", "sgd-2-layers"])
def test_dense_capacity_buffers_give_the_strided_layouts_trajectory(monkeypatch, changes):
    """The dense layout (active blocks contiguous: #19 on GPUs, #30 on CPUs)
    against the reference (strided views of wider buffers): the same training
    run, bit for bit, while widths grow and shrink, under the same optimiser
    (torch.optim.Adam: the lean Adam takes the dense layout only,
    tests/awnn/test_lean_adam.py).  On CPU here; tests/system/test_gpu.py
    runs it on CUDA."""
    import awnn.optim as optim
    from train_helpers import config, tiny_task

    task = tiny_task()
    runs = []
    for dense in (False, True):
        monkeypatch.setattr(optim, "DENSE_VIEWS", dense)
        from awnn.train import Trainer

        t = Trainer(config(epochs=4, **changes), task, lean=False)
        t.run()
        weights = [m for m in t.model.modules() if hasattr(m, "_wbuf")]
        assert all(m._wbuf.dense == dense for m in weights if m.weight.dim() == 2 and hasattr(m._wbuf, "dense"))
        runs.append(t)
    ref, dense = runs
    assert len({r["width_total"] for r in ref.history}) > 1  # widths moved
    assert all(p.is_contiguous() for p in dense.model.parameters())  # what the multi-tensor kernels' fast route needs
    assert not all(p.is_contiguous() for p in ref.model.parameters())  # the reference layout really is the strided one
    strip = lambda h: [{k: v for k, v in r.items() if k != "train_seconds"} for r in h]  # noqa: E731
    assert strip(dense.history) == strip(ref.history)
    for (k, a), b in zip(ref.model.state_dict().items(), dense.model.state_dict().values()):
        if torch.is_tensor(a):
            assert torch.equal(a, b), k
    sa, sb = ref.optimizer.state_dict()["state"], dense.optimizer.state_dict()["state"]
    for i in sa:
        for k in sa[i]:
            assert torch.equal(sa[i][k], sb[i][k]), (i, k)


@pytest.mark.parametrize("fill", ["normal", "uniform"])
@pytest.mark.parametrize(
    "start, cap, steps",
    [
        ((4, 2), (64, 2), [(40, 2), (12, 2), (60, 2)]),  # rows of a first layer: contiguous regions in both layouts (>= 16 entries)
        ((2, 30), (2, 64), [(2, 50), (2, 10), (2, 64)]),  # columns of a 2-row read-out: strided in both
        ((1, 30), (1, 64), [(1, 50), (1, 20), (1, 60)]),  # one row: contiguous in both
        ((5, 6), (40, 40), [(30, 6), (30, 25), (8, 3), (36, 38)]),  # rows and columns of a hidden layer: contiguous dense, strided reference
    ],
    ids=["first-layer-rows", "readout-columns", "one-row", "hidden-both"],
)
def test_dense_and_strided_buffers_draw_the_same_new_entries(monkeypatch, fill, start, cap, steps):
    """A resize of a dense buffer draws its new entries straight into the region
    when the strided layout's region has the same contiguity (the same kernel
    path), through a scratch with the strided row stride otherwise: either way
    bit for bit what the reference layout draws, for the fills new neurons get."""
    import awnn.optim as optim

    draw = (lambda t: t.normal_(0.0, 1.5)) if fill == "normal" else (lambda t: t.uniform_(-0.3, 0.3))
    views = []
    for dense in (False, True):
        monkeypatch.setattr(optim, "DENSE_VIEWS", dense)
        torch.manual_seed(0)
        cb = CapacityBuffer(torch.randn(start), cap)
        assert cb.dense == dense
        seen = []
        for shape in steps:
            torch.manual_seed(len(seen) + 1)
            seen.append(cb.resize(shape, cap, draw, draw).clone())
        views.append(seen)
    for ref, got in zip(*views):
        assert torch.equal(ref, got)
    assert any(v.numel() >= 16 for v in views[0])  # big enough for the vectorised normal_ path


def test_reset_optimizer_state_gives_zero_dense_state_of_the_new_shape_in_kept_buffers():
    """The reset path (`authors`: a resized layer's Adam state restarts): every
    state tensor of the parameter's shape becomes a zeroed dense view of the new
    shape, the step is zeroed, nothing of the old state shows through; within
    the capacity the same flat buffer is reused (no allocation), beyond it a
    larger one is made; after a load_state_dict the state's new tensors (here
    float64) are followed."""
    from awnn.optim import reset_optimizer_state

    p = torch.nn.Parameter(torch.randn(3, 4))
    opt = torch.optim.Adam([p], lr=0.1)
    p.grad = torch.randn(3, 4)
    opt.step()
    zero: list = []
    reset_optimizer_state(opt, p, (3, 4), (5, 6), (8, 8), zero)
    st = opt.state[p]
    assert {id(t) for t in zero} == {id(st["exp_avg"]), id(st["exp_avg_sq"]), id(st["step"])}
    torch._foreach_zero_(zero)
    assert st["exp_avg"].shape == (5, 6) and st["exp_avg"].is_contiguous() and not st["exp_avg"].any() and float(st["step"]) == 0
    ptr, moment = st["exp_avg"].data_ptr(), st["exp_avg"]
    st["exp_avg"].fill_(3.0)  # state written by later steps
    zero = []
    reset_optimizer_state(opt, p, (5, 6), (8, 2), (8, 8), zero)
    assert st["exp_avg"].data_ptr() == ptr and st["exp_avg"].shape == (8, 2)  # the kept buffer
    assert st["exp_avg"] is moment and st["exp_avg"].is_contiguous()  # the same object, re-pointed
    torch._foreach_zero_(zero)
    assert not st["exp_avg"].any()
    zero = []
    reset_optimizer_state(opt, p, (8, 2), (9, 9), (12, 9), zero)  # beyond the buffer: a larger one
    torch._foreach_zero_(zero)
    assert st["exp_avg"].shape == (9, 9) and st["exp_avg"].data_ptr() != ptr and not st["exp_avg_sq"].any()
    assert moment.shape == (8, 2)  # (a new buffer, a new view: the old one is left as it was)
    same: list = []
    reset_optimizer_state(opt, p, (9, 9), (9, 9), (12, 9), same)  # shape unchanged: zeroed where it is
    assert len(same) == 3 and any(t is st["exp_avg"] for t in same)
    st["exp_avg"], st["exp_avg_sq"] = torch.ones(9, 9, dtype=torch.float64), torch.ones(9, 9, dtype=torch.float64)
    zero = []
    reset_optimizer_state(opt, p, (9, 9), (4, 4), (12, 9), zero)
    torch._foreach_zero_(zero)
    assert st["exp_avg"].dtype == torch.float64 and st["exp_avg"].shape == (4, 4) and not st["exp_avg"].any()
    before = torch.optim.Adam([torch.nn.Parameter(torch.ones(2))])
    reset_optimizer_state(before, before.param_groups[0]["params"][0], (2,), (5,), (5,), zero)  # no step yet: nothing to reset
    assert not before.state and reset_optimizer_state(None, p, (4, 4), (5, 5), (5, 5), zero) is None
