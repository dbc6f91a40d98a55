"""Fused trials (awnn/stacked.py, issue #20): N same-shape fixed MLPs trained as
one stacked model must give each config the run the Trainer gives it."""
import math
import time

import pytest
import torch

from awnn.config import TrainConfig
from awnn.layers import FixedMLP
from awnn.stacked import GROUP_KEYS, StackedAdam, StackedMLP, StackedTrainer, check_fusable, group_configs, group_key, train_grouped
from awnn.train import Trainer
from train_helpers import F64_TOL, fixed_config, one_thread, task, task64, tiny_task  # noqa: F401 - one_thread, task, task64: fixtures

# Tolerances, from the arithmetic.  The fused path computes each slice with
# other kernels than the Trainer (baddbmm over a stack vs addmm, a reduction
# over a (slices, batch) tensor, addcmul for the decay): the same sums in
# another order, whose rounding depends on the CPU's kernels (AVX-512 vs AVX2
# vs ARM, BLAS blocking).  Adam divides a gradient by its own running RMS, so a
# rounding-size difference on a near-dead unit becomes a full-size step:
# float32 trajectories may drift apart visibly within an epoch on some CPUs
# (issue #29: 1e-4 in a loss on an AMD EPYC).  So trajectories are compared in
# float64, where a rounding is 1.1e-16: over a few epochs of ~10 steps the
# differences stay below 1e-14 (measured <= 4.4e-16 in losses, 1.9e-15 in
# weights, with the AVX-512, AVX2 and scalar kernels); 1e-9 leaves five orders
# of margin and is still five orders below what one wrong lr, decay, seed,
# init or batch order gives (measured >= 1e-2: test_equality_checks_catch_a_wrong_slice).
# F64_TOL = 1e-9 (tests/train_helpers.py, shared with tests/awnn/test_lean.py)
# float32, one step: a gradient entry is a sum over the batch (<= 512 terms),
# whose rounding error is <= n * 2**-24 of the sum of |terms|; measured ~1e-7
# of the tensor's largest entry.  Relative to that scale: 1e-5.
GRAD_RTOL = 1e-5
CORE_KEYS = {"epoch", "train_loss", "train_acc", "val_loss", "val_acc", "best_val_acc", "train_seconds", "status", "width_total"}


pytestmark = pytest.mark.usefixtures("one_thread")


cfg = fixed_config


# differing in lr, weight decay, seed and the per-slice selection rules
MIXED = [cfg(lr=0.01, seed=0), cfg(lr=0.1, seed=1, select_metric="loss"), cfg(lr=0.003, weight_decay=1e-3, seed=2),
         cfg(lr=0.02, seed=3, weight_decay=0.05, best_epoch_ties="later")]


def without_time(history):
    return [{k: v for k, v in r.items() if k != "train_seconds"} for r in history]


def assert_histories_close(a: list[dict], b: list[dict], tol: float = F64_TOL) -> None:
    """Two runs' per-epoch records: the same epochs, statuses and accuracies,
    float figures within `tol` (run in float64: see F64_TOL)."""
    assert [r["epoch"] for r in a] == [r["epoch"] for r in b]
    for x, y in zip(without_time(a), without_time(b)):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], float) and math.isnan(x[k]):  # (no score: a diverged first epoch's best_val_acc)
                assert isinstance(y[k], float) and math.isnan(y[k]), (x["epoch"], k, y[k])
            elif isinstance(x[k], float) and not k.endswith("_acc"):
                same = x[k] == y[k] or abs(x[k] - y[k]) <= tol or (math.isnan(x[k]) and math.isnan(y[k]))
                assert same, (x["epoch"], k, x[k], y[k])
            else:
                assert x[k] == y[k], (x["epoch"], k)


def max_weight_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


# ------------------------------------------------------------ the reference path
def test_stacked_initial_weights_are_bit_identical_to_trainer(task):
    fused = StackedTrainer(MIXED, task)
    for i, c in enumerate(MIXED):
        ref = Trainer(c, task).model.state_dict()
        mine = fused.state_dict(i)
        assert mine.keys() == ref.keys()
        assert all(torch.equal(mine[k], ref[k]) for k in ref)


@pytest.mark.parametrize("split", ["outer", "inner"])
def test_stacked_training_matches_trainer_per_epoch(task64, split):
    task = task64
    configs = [c.replace(split=split) for c in MIXED]
    fused = StackedTrainer(configs, task)
    results = fused.run()
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        ref = trainer.run()
        got = results[i]
        assert len(got.history) == len(ref.history) == c.epochs
        for mine, theirs in zip(got.history, ref.history):
            assert CORE_KEYS <= mine.keys() <= theirs.keys()
            for k in ("train_loss", "train_nll", "val_loss"):
                assert abs(mine[k] - theirs[k]) <= F64_TOL, (i, mine["epoch"], k)
            assert (mine["train_acc"], mine["val_acc"], mine["best_val_acc"], mine["status"]) == \
                (theirs["train_acc"], theirs["val_acc"], theirs["best_val_acc"], theirs["status"])
        assert (got.status, got.best_epoch, got.epochs_run, got.widths, got.n_train) == (ref.status, ref.best_epoch, ref.epochs_run, ref.widths, ref.n_train)
        assert got.best_val_acc == ref.best_val_acc
        if split == "outer":
            assert got.test_acc == ref.test_acc and abs(got.test_loss - ref.test_loss) <= F64_TOL
            assert max_weight_diff(fused.slices[i].best_model, trainer.best_model) <= F64_TOL
        else:
            assert math.isnan(got.test_acc)
        assert max_weight_diff(fused.state_dict(i), trainer.model.state_dict()) <= F64_TOL


def grads_and_weights_after_one_step(trainer) -> tuple[dict, dict]:
    return ({k: p.grad.detach().clone() for k, p in trainer.model.named_parameters()},
            {k: v.detach().clone() for k, v in trainer.model.state_dict().items()})


@pytest.mark.parametrize("changes", [{}, {"activation": "tanh", "weight_decay": 1e-3}, {"hidden_layers": 1, "activation": "gelu"}],
                         ids=["relu", "tanh-decay", "gelu"])
def test_float32_one_step_gradients_and_updates_match_trainer(task, changes):
    """In float32 (the precision trials run in) one step of both paths, one
    batch of the whole training part: gradients equal up to float32
    rounding of the batch sums; Adam's first update is lr * g / (|g| + eps),
    i.e. +-lr wherever the gradient's sign is not within its rounding:
    there both updates agree to float32 rounding."""
    configs = [cfg(lr=0.01, seed=0, epochs=1, batch_size=512, **changes), cfg(lr=0.1, seed=1, epochs=1, batch_size=512, **changes)]
    fused = StackedTrainer(configs, task)
    before = [fused.state_dict(i) for i in range(2)]
    fused._train_epoch()  # one batch: fused.model.grad holds its gradient, flat the updated weights
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        trainer.run()
        ref_grad, ref_after = grads_and_weights_after_one_step(trainer)
        after = fused.state_dict(i)
        for l in range(len(fused.model.weights)):
            for name, mine in ((f"layers.{l}.weight", fused.model.weights[l].grad[i].t()), (f"layers.{l}.bias", fused.model.biases[l].grad[i, 0])):
                theirs = ref_grad[name]
                scale = float(theirs.abs().max())
                assert scale > 0 and float((mine - theirs).abs().max()) <= GRAD_RTOL * scale, (i, name)
                clear = theirs.abs() > 100 * GRAD_RTOL * scale  # a sign well above its rounding
                assert clear.float().mean() > 0.5, (i, name)  # (most entries: the update check below covers them)
                step_mine, step_ref = after[name] - before[i][name], ref_after[name] - before[i][name]
                assert torch.allclose(step_mine[clear], step_ref[clear], rtol=1e-5, atol=1e-6 * c.lr), (i, name)
                assert float(step_ref[clear].abs().min()) > 0.5 * c.lr  # the update is a full step there


def wrong_slice_gaps(task, c: TrainConfig, mine) -> dict[str, float]:
    """Largest per-epoch train-loss gap between slice result `mine` and the
    Trainer of `c` with one thing changed, for each thing a fused slice could
    get wrong."""
    def gap(trainer) -> float:
        ref = trainer.run()
        return max(abs(a["train_loss"] - b["train_loss"]) for a, b in zip(mine.history, ref.history, strict=True))

    order = Trainer(c, task)
    order.generator = torch.Generator().manual_seed(c.seed + 1)  # another batch order, the same init
    init = Trainer(c.replace(seed=c.seed + 1), task)
    init.generator = torch.Generator().manual_seed(c.seed)  # another init, the same batch order
    return {"lr": gap(Trainer(c.replace(lr=c.lr * 1.1), task)), "weight_decay": gap(Trainer(c.replace(weight_decay=c.weight_decay + 1e-3), task)),
            "seed": gap(Trainer(c.replace(seed=c.seed + 7), task)), "batch order": gap(order), "init": gap(init)}


def test_equality_checks_catch_a_wrong_slice(task64):
    """The float64 tolerance is far below what a fused slice trained with
    another slice's (or a wrong) lr, decay, seed, init or batch order shows:
    the equality tests above would fail on such a bug."""
    fused = StackedTrainer(MIXED[:2], task64).run()
    ok = wrong_slice_gaps(task64, MIXED[0], fused[0])
    assert all(g > 1e4 * F64_TOL for g in ok.values()), ok
    swapped = max(abs(a["train_loss"] - b["train_loss"]) for a, b in zip(fused[0].history, Trainer(MIXED[1], task64).run().history))
    assert swapped > 1e4 * F64_TOL


@pytest.mark.parametrize("changes", [{"activation": "relu6"}, {"activation": "leaky_relu"}, {"activation": "tanh"},
                                     {"activation": "gelu"}, {"width": 0}, {"hidden_layers": 1, "batch_size": 128},
                                     {"layer_widths": "24,8"}],
                         ids=["relu6", "leaky_relu", "tanh", "gelu", "linear", "1-layer-batch-128", "layer-widths"])
def test_stacked_shapes_and_activations_match_trainer(task64, changes):
    task = task64
    configs = [cfg(lr=0.05, seed=0, epochs=2, **changes), cfg(lr=0.01, seed=1, epochs=2, **changes)]
    fused = StackedTrainer(configs, task)
    results = fused.run()
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        ref = trainer.run()
        assert results[i].widths == ref.widths
        for mine, theirs in zip(results[i].history, ref.history, strict=True):
            assert abs(mine["train_loss"] - theirs["train_loss"]) <= F64_TOL and mine["val_acc"] == theirs["val_acc"]
        assert max_weight_diff(fused.state_dict(i), trainer.model.state_dict()) <= F64_TOL


def test_mixed_activations_in_one_stack_match_trainer(task64):
    """Slices of one shape with different activations (relu, leaky_relu, relu6 as the
    fixed grids mix them) share a stack; each trains as the Trainer trains it, also
    after a slice in the middle of an activation run has left (patience 1)."""
    configs = [cfg(activation="relu", lr=0.05, seed=0, epochs=4), cfg(activation="relu", lr=0.5, seed=1, epochs=4, patience=1),
               cfg(activation="leaky_relu", lr=0.05, seed=2, epochs=4), cfg(activation="relu6", lr=0.01, seed=3, epochs=4),
               cfg(activation="relu6", lr=0.05, seed=4, epochs=4)]
    task = task64
    fused = StackedTrainer(configs, task)
    results = fused.run()
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        ref = trainer.run()
        assert [r["epoch"] for r in results[i].history] == [r["epoch"] for r in ref.history]
        for mine, theirs in zip(results[i].history, ref.history, strict=True):
            assert abs(mine["train_loss"] - theirs["train_loss"]) <= F64_TOL and mine["val_acc"] == theirs["val_acc"]
        assert max_weight_diff(fused.state_dict(i), trainer.model.state_dict()) <= F64_TOL
    assert group_configs([configs[3], configs[0], configs[2], configs[1]]) == [[2, 1, 3, 0]]  # one group, one run per activation


def test_padded_widths_train_as_their_own_width(task64):
    """Widths 8, 16 and 24 (up to PAD_WIDTH) share one stack 24 wide; each slice trains
    as the Trainer trains its own width, records its own widths, and its extra units
    stay exactly zero.  Widths above PAD_WIDTH, or a per-layer width, stay apart."""
    configs = [cfg(width=24, lr=0.01, seed=0), cfg(width=8, lr=0.05, seed=1, activation="relu6"),
               cfg(width=16, lr=0.05, seed=2, weight_decay=1e-3), cfg(width=8, lr=0.5, seed=3, patience=1)]
    assert len({group_key(c) for c in configs}) == 1
    assert len({group_key(c) for c in (cfg(width=16), cfg(width=64), cfg(width=32), cfg(layer_widths="8,16"))}) == 3  # 16 and 32 pad
    task = task64
    fused = StackedTrainer(configs, task)
    assert fused.model.dims == [(2, 24), (24, 24), (24, 2)]
    results = fused.run()
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        ref = trainer.run()
        assert results[i].widths == ref.widths == [c.width] * 2 and results[i].history[-1]["width_total"] == 2 * c.width
        for mine, theirs in zip(results[i].history, ref.history, strict=True):
            assert abs(mine["train_loss"] - theirs["train_loss"]) <= F64_TOL and mine["val_acc"] == theirs["val_acc"]
        assert max_weight_diff(fused.state_dict(i), trainer.model.state_dict()) <= F64_TOL
    # every weight outside a slice's own block is still exactly zero after training
    probe = StackedTrainer(configs[:3], task)
    for _ in range(2):
        probe._epoch(None)
    for row in range(probe.model.n):
        for l, (w, b) in enumerate(zip(probe.model.weights, probe.model.biases)):
            fan_in, fan_out = probe.model.slice_dims[row][l]
            outside = w.detach()[row].clone()
            outside[:fan_in, :fan_out] = 0
            assert not outside.any() and not b.detach()[row, 0, fan_out:].any(), (row, l)


def test_stacked_adam_matches_torch_adam_per_slice():
    torch.manual_seed(0)
    mlps = [FixedMLP(3, 2, hidden_layers=1, width=5) for _ in range(3)]
    stack = StackedMLP(mlps)
    lrs, wds, eps = [0.01, 0.3, 1e-3], [0.0, 0.0, 0.01], [1e-8, 1e-6, 1e-8]
    adam = StackedAdam(stack, lrs, wds, eps)
    refs = [torch.optim.Adam(m.parameters(), lr=lr, weight_decay=wd, eps=e, foreach=True) for m, lr, wd, e in zip(mlps, lrs, wds, eps)]
    start = [stack.state_dict(row) for row in range(3)]
    for _ in range(5):
        stack.grad.copy_(torch.randn_like(stack.grad))
        for row, (m, opt) in enumerate(zip(mlps, refs)):
            for l, layer in enumerate(m.layers):
                layer.weight.grad = stack.weights[l].grad[row].t().clone()
                layer.bias.grad = stack.biases[l].grad[row, 0].clone()
            opt.step()
        adam.step()
    # Elementwise operations only (no sums), in torch's order: each may differ
    # by an ulp where one kernel fuses a multiply-add the other rounds twice
    # (CPU-dependent), i.e. <= 2**-23 (|p| + lr) per step: 5 steps, |p| < 1,
    # lr <= 0.3: < 1e-6.  A wrong lr, decay, eps or state row moves a weight
    # by ~lr per step (>= 1e-3 here).
    for row, m in enumerate(mlps):
        assert max_weight_diff(stack.state_dict(row), m.state_dict()) <= 1e-6, row
        assert max_weight_diff(stack.state_dict(row), start[row]) > 1e-3, row  # each moved a thousand tolerances


# ------------------------------------------------- a slice's end leaves the others alone
def test_stacked_diverging_slice_leaves_others_unchanged(task64):
    task = task64
    others = [cfg(lr=0.01, seed=0), cfg(lr=0.003, seed=2)]
    wild = cfg(lr=1e300, seed=1)  # weights of ~1e300 overflow the logits (float64): NaN loss in the first epoch
    with_it = StackedTrainer([others[0], wild, others[1]], task).run()
    without = StackedTrainer(others, task).run()
    assert with_it[1].status == "diverged" and with_it[1].epochs_run == 1
    ref = Trainer(wild, task).run()
    assert (ref.status, ref.epochs_run) == ("diverged", 1)
    for mine, alone in zip([with_it[0], with_it[2]], without):
        assert mine.status == "ok" and mine.epochs_run == 4
        assert_histories_close(mine.history, alone.history)


def test_stacked_early_stopped_slice_leaves_others_unchanged(task64):
    task = task64
    others = [cfg(lr=0.01, seed=0), cfg(lr=0.003, seed=2)]
    quitter = cfg(lr=0.5, seed=2, patience=1, epochs=6)  # val accuracy drops at epoch 3: stops there (float64)
    others = [c.replace(epochs=6) for c in others]
    fused = StackedTrainer([quitter, *others], task)
    with_it = fused.run()
    without = StackedTrainer(others, task).run()
    ref = Trainer(quitter, task).run()
    assert with_it[0].epochs_run == ref.epochs_run < 6
    assert with_it[0].best_epoch == ref.best_epoch
    for mine, alone in zip(with_it[1:], without):
        assert mine.epochs_run == 6
        assert_histories_close(mine.history, alone.history)
    # cost: the stopped slice stops paying; the others split every epoch equally
    assert with_it[0].train_seconds < with_it[1].train_seconds
    assert with_it[1].train_seconds == with_it[2].train_seconds
    for r in with_it:
        assert r.history[-1]["train_seconds"] == r.train_seconds


def test_stacked_cost_shares_sum_to_group_time(task):
    configs = [cfg(lr=lr, seed=s) for lr, s in ((0.01, 0), (0.02, 1), (0.05, 2))]
    fused = StackedTrainer(configs, task)
    t0 = time.perf_counter()
    results = fused.run()
    wall = time.perf_counter() - t0
    total = sum(r.train_seconds for r in results)
    assert 0.0 < total <= wall
    assert results[0].train_seconds == results[1].train_seconds == results[2].train_seconds  # equal shares


# ---------------------------------------------------------------------- grouping
def test_group_configs_separates_shapes_and_caps_size():
    configs = [cfg(width=64, lr=lr, seed=s) for lr in (0.01, 0.1) for s in range(3)]  # 6 of one shape (above PAD_WIDTH: not padded)
    configs += [cfg(width=48), cfg(width=64, hidden_layers=1), cfg(width=64, batch_size=128), cfg(width=64, activation="relu6"), cfg(width=48, lr=0.1),
                cfg(layer_widths="16,8"), cfg(layer_widths="8,16")]
    groups = group_configs(configs, max_group=4)
    assert sorted(i for g in groups for i in g) == list(range(len(configs)))
    assert all(len(g) <= 4 for g in groups)
    assert groups[:2] == [[0, 1, 2, 3], [4, 5, 9]]  # (the relu6 config: one shape, another activation: the same group, after the relus)
    assert [6, 10] in groups and [7] in groups and [8] in groups and [11] in groups and [12] in groups
    for g in groups:
        keys = {tuple(getattr(configs[i], k) for k in GROUP_KEYS) for i in g}
        assert len(keys) == 1


def test_train_grouped_returns_results_in_config_order(task64):
    task = task64
    configs = [cfg(width=8, epochs=2), cfg(width=16, epochs=2), cfg(width=8, epochs=2, lr=0.1)]
    seen = []
    results = train_grouped(configs, task, on_epoch=lambda i, rec: seen.append((i, rec["epoch"])))
    assert [r.widths for r in results] == [[8, 8], [16, 16], [8, 8]]
    assert sorted(seen) == [(i, e) for i in range(3) for e in (1, 2)]
    alone = Trainer(configs[2], task).run()
    assert abs(results[2].history[-1]["train_loss"] - alone.history[-1]["train_loss"]) <= F64_TOL


# ------------------------------------------------------------ unsupported options
@pytest.mark.parametrize("key, changes", [
    ("model", {"model": "awnn"}),
    ("optimizer", {"optimizer": "sgd"}),
    ("lr_schedule", {"lr_schedule": "multistep", "lr_milestones": "2"}),
    ("task", {"task": "mnist"}),
])
def test_check_fusable_unsupported_option_raises_naming_key(key, changes):
    c = cfg(**changes)
    with pytest.raises(ValueError, match=f"key '{key}'"):
        check_fusable(c)
    with pytest.raises(ValueError, match=f"key '{key}'"):
        group_configs([cfg(), c])


def test_stacked_trainer_mixed_group_raises_naming_key(task):
    with pytest.raises(ValueError, match="key 'width'"):
        StackedTrainer([cfg(), cfg(width=64)], task)  # (16 and 8 would share a padded stack; 64 is above PAD_WIDTH)
    with pytest.raises(ValueError, match="key 'batch_size'"):
        StackedTrainer([cfg(), cfg(batch_size=128)], task)
    with pytest.raises(ValueError, match="max_group"):
        group_configs([cfg()], max_group=0)
    with pytest.raises(ValueError, match="configs"):
        StackedTrainer([], task)


# ------------------------------------------------------------ continuing elsewhere (a fused Ray trial's checkpoint)
class _Killed(Exception):
    pass


def weights(t: StackedTrainer) -> list[dict]:
    return [t.state_dict(i) for i in range(len(t.slices))]


def test_saved_group_continues_exactly_as_if_never_stopped(task):
    """A checkpoint taken between epochs (a slice already gone: patience 1) and
    loaded into a fresh group trains on to the same histories and weights."""
    configs = [c.replace(epochs=6) for c in MIXED] + [cfg(lr=0.5, seed=9, epochs=6, patience=1)]
    whole = StackedTrainer(configs, task)
    full = whole.run()
    saved = {}
    first = StackedTrainer(configs, task)

    def stop_after_3():
        if first.epoch == 3:
            saved["state"] = first.save()
            raise _Killed

    with pytest.raises(_Killed):
        first.run(after_epoch=stop_after_3)
    again = StackedTrainer(configs, task)
    again.load(saved["state"])
    assert again.epoch == 3 and again.alive == first.alive
    ended = []
    resumed = again.run(on_end=lambda i, r: ended.append(i))
    for a, b in zip(full, resumed):
        assert without_time(a.history) == without_time(b.history)
        assert (a.status, a.best_epoch, a.best_val_acc) == (b.status, b.best_epoch, b.best_val_acc)
    assert all(max_weight_diff(x, y) == 0.0 for x, y in zip(weights(whole), weights(again)))
    assert sorted(ended) == sorted(first.alive)  # only the slices still training when it was saved end again


def test_load_refuses_another_groups_checkpoint_and_drop_takes_configs_out(task64):
    task = task64
    state = StackedTrainer(MIXED, task).save()
    with pytest.raises(ValueError, match="other configs"):
        StackedTrainer([c.replace(lr=c.lr * 2) for c in MIXED], task).load(state)
    with pytest.raises(ValueError, match="format"):
        StackedTrainer(MIXED, task).load({"format": "awnn-train-v1"})
    t = StackedTrainer(MIXED, task)
    t.drop([1, 3])
    assert t.alive == [0, 2] and t.model.n == 2
    results = t.run()
    assert results[1].epochs_run == 0 and results[3].epochs_run == 0
    kept = StackedTrainer([MIXED[0], MIXED[2]], task).run()
    for a, b in zip([results[0], results[2]], kept):
        assert_histories_close(a.history, b.history)


@pytest.mark.parametrize("n", [4, 1], ids=["a group of 4", "the lean loop's one"])
def test_skinny_products_taken_transposed_train_as_the_trainer(task64, monkeypatch, n):
    """A group large enough for both of awnn/products.py's transposed branches
    (the read-out and its weight gradient: N x B x D over their work
    thresholds), of 4 slices or of one (an unfused trial's), trains each
    slice as the Trainer trains it (float64)."""
    import awnn.products as products
    import awnn.stacked as stacked
    import awnn.stacked_grad as stacked_grad

    monkeypatch.setattr(products, "_ON", True)
    taken = {"read_out": 0, "weight_grad": 0}
    affine, weight_grad = products.stacked_affine, products.stacked_weight_grad_

    def spy_affine(bias, h, w):
        out = affine(bias, h, w)
        taken["read_out"] += not out.is_contiguous()  # the transposed branch returns a view of (N, classes, B)
        return out

    def spy_weight_grad(out, h, g):
        taken["weight_grad"] += products.stacked_weight_grad_transposed(h, g)
        return weight_grad(out, h, g)

    monkeypatch.setattr(stacked, "stacked_affine", spy_affine)
    monkeypatch.setattr(stacked_grad, "stacked_affine", spy_affine)
    monkeypatch.setattr(stacked_grad, "stacked_weight_grad_", spy_weight_grad)
    configs = [cfg(hidden_layers=1, width=128, batch_size=128, epochs=2, lr=lr, seed=s) for s, lr in enumerate((0.01, 0.05, 0.003, 0.02))][:n]
    assert n * 128 * 128 >= products._STACKED_READ_OUT_WORK
    fused = StackedTrainer(configs, task64)
    results = fused.run()
    assert taken["read_out"] > 0 and taken["weight_grad"] > 0, taken
    for i, c in enumerate(configs):
        trainer = Trainer(c, task64)
        ref = trainer.run()
        for mine, theirs in zip(results[i].history, ref.history, strict=True):
            assert abs(mine["train_loss"] - theirs["train_loss"]) <= F64_TOL and mine["val_acc"] == theirs["val_acc"]
        assert max_weight_diff(fused.state_dict(i), trainer.model.state_dict()) <= F64_TOL
