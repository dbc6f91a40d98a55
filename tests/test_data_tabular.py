"""The synthetic tabular tasks and the paper's splits (Table 2)."""
import numpy as np
import pytest
import torch

from awnn.data import load_task, stratified_split
from awnn.data.tabular import make_tabular

# Table 2: samples, outer TR/VL/TE, inner TR/VL
TABLE_2 = {
    "doublemoon": (2500, (1750, 250, 500), (1800, 200)),
    "spiral": (2500, (1750, 250, 500), (1800, 200)),
    "spiralhard": (5000, (3500, 500, 1000), (3600, 400)),
}


@pytest.fixture(scope="module", params=sorted(TABLE_2))
def task(request):
    return load_task(request.param, data_seed=0)


def test_tabular_task_shapes_and_balanced_classes(task):
    n = TABLE_2[task.name][0]
    assert tuple(task.x.shape) == (n, 2) and task.x.dtype == torch.float32
    assert task.in_features == 2 and task.num_classes == 2 and task.kind == "tabular"
    assert torch.bincount(task.y).tolist() == [n // 2, n // 2]
    assert torch.isfinite(task.x).all()


def test_tabular_split_sizes_match_table_2(task):
    _, outer, inner = TABLE_2[task.name]
    assert (len(task.outer.train), len(task.outer.val), len(task.outer.test)) == outer
    assert (len(task.inner.train), len(task.inner.val)) == inner
    assert len(task.inner.test) == 0
    assert task.n_train("outer") == outer[0] and task.n_train("inner") == inner[0]


def test_tabular_splits_partition_the_data(task):
    n = TABLE_2[task.name][0]
    o, i = task.outer, task.inner
    outer_all = np.concatenate([o.train, o.val, o.test])
    assert len(np.unique(outer_all)) == n == len(outer_all)
    # the inner split re-splits outer train + validation; test is never touched
    pool = np.sort(np.concatenate([o.train, o.val]))
    inner_all = np.concatenate([i.train, i.val])
    assert len(np.unique(inner_all)) == len(inner_all)
    assert np.array_equal(np.sort(inner_all), pool)
    assert not set(inner_all) & set(o.test)


def test_tabular_splits_are_stratified(task):
    y = task.y.numpy()
    for part in [task.outer.train, task.outer.val, task.outer.test, task.inner.train, task.inner.val]:
        counts = np.bincount(y[part], minlength=2)
        assert abs(counts[0] - counts[1]) <= 1, counts


def test_tabular_splits_depend_only_on_data_seed():
    a, b, c = load_task("spiral", data_seed=0), load_task("spiral", data_seed=0), load_task("spiral", data_seed=1)
    assert torch.equal(a.x, b.x) and np.array_equal(a.outer.train, b.outer.train) and np.array_equal(a.inner.val, b.inner.val)
    assert not np.array_equal(a.outer.train, c.outer.train)
    assert not torch.equal(a.x, c.x)


def angle_residual(x, y, turns):
    """Median |atan2 angle - 2*pi*turns*radius - pi*class| (wrapped): small when `turns` fits."""
    r = np.hypot(x[:, 0], x[:, 1])
    d = np.arctan2(x[:, 1], x[:, 0]) - (2 * np.pi * turns * r + np.pi * y)
    return float(np.median(np.abs(np.angle(np.exp(1j * d)))))


def test_tabular_spiralhard_winds_twice_as_often_as_spiral():
    x, y = make_tabular("spiral", 0)
    xh, yh = make_tabular("spiralhard", 0)
    assert len(x) == 2500 and len(xh) == 5000
    assert angle_residual(x, y, 1.5) < 0.6 < 1.2 < angle_residual(x, y, 3.0)
    assert angle_residual(xh, yh, 3.0) < 0.6 < 1.2 < angle_residual(xh, yh, 1.5)


def test_task_batches_cover_train_part_once_per_epoch(task):
    g = torch.Generator().manual_seed(0)
    xs, ys = zip(*task.batches("outer", "train", 128, torch.device("cpu"), g))
    assert [len(b) for b in ys[:-1]] == [128] * (len(ys) - 1)
    x = torch.cat(xs)
    ref_x, ref_y = task.tensors("outer", "train", torch.device("cpu"))
    assert len(x) == len(ref_x)
    # a permutation of the train rows
    assert torch.equal(torch.sort(x[:, 0]).values, torch.sort(ref_x[:, 0]).values)
    assert torch.equal(torch.cat(ys).sum(), ref_y.sum())
    # evaluation batches come in order
    ex = torch.cat([b for b, _ in task.batches("outer", "val", 100, torch.device("cpu"))])
    assert torch.equal(ex, task.tensors("outer", "val", torch.device("cpu"))[0])


def test_stratified_split_rejects_fractions_not_summing_to_one():
    with pytest.raises(ValueError, match="fractions must sum to 1"):
        stratified_split(np.zeros(10), (0.5, 0.4), seed=0)


def test_stratified_split_sizes_with_uneven_classes():
    labels = np.array([0] * 7 + [1] * 13 + [2] * 30)
    parts = stratified_split(labels, (0.7, 0.1, 0.2), seed=3)
    assert sum(len(p) for p in parts) == 50 and len(np.unique(np.concatenate(parts))) == 50
    assert [len(p) for p in parts] == pytest.approx([35, 5, 10], abs=3)
    for cls, n in [(0, 7), (1, 13), (2, 30)]:
        got = [int((labels[p] == cls).sum()) for p in parts]
        assert all(abs(g - f * n) < 1 for g, f in zip(got, (0.7, 0.1, 0.2))), (cls, got)


def test_load_task_unknown_lists_choices():
    with pytest.raises(ValueError, match=r"Could not resolve task 'moons' among choices \[.*'doublemoon'"):
        load_task("moons")
