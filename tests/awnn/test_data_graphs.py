"""Graph tasks: TU raw text files read through torch-geometric's TUDataset,
the stratified 10-fold outer split with its inner holdout, constant
features for REDDIT-BINARY, clear errors, and a GIN that learns structure."""
import os

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric", reason="the graph tasks need torch-geometric")

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import DataError, load_task  # noqa: E402
from awnn.data.graphs import tu_fold_splits  # noqa: E402
from awnn.train import train  # noqa: E402
from data_helpers import write_tu  # noqa: E402


def test_tu_fold_splits_partition_and_stratify():
    labels = np.array([0] * 300 + [1] * 100)
    tests = []
    for fold in range(10):
        outer, inner = tu_fold_splits(labels, fold, seed=0)
        parts = [outer.train, outer.val, outer.test]
        assert sum(len(p) for p in parts) == 400 and len(np.unique(np.concatenate(parts))) == 400
        assert [len(outer.train), len(outer.val), len(outer.test)] == [320, 40, 40]  # NCI1-like 80/10/10
        assert labels[outer.test].mean() == 0.25 and labels[outer.val].mean() == 0.25
        pool = np.sort(np.concatenate([outer.train, outer.val]))
        assert np.array_equal(np.sort(np.concatenate([inner.train, inner.val])), pool)  # inner: 90/10 of the 9 folds
        assert len(inner.val) == 36
        tests.append(outer.test)
    assert len(np.unique(np.concatenate(tests))) == 400  # the 10 test folds cover the data once
    with pytest.raises(ValueError, match="fold"):
        tu_fold_splits(labels, 10)


def test_nci1_reads_tu_files_with_node_label_features(tmp_path):
    write_tu(tmp_path, "NCI1")
    task = load_task("nci1", str(tmp_path))
    assert (task.kind, task.num_classes, task.in_features, len(task.graphs)) == ("graph", 2, 3, 60)
    b, y = next(task.batches("outer", "train", 8, torch.device("cpu"), torch.Generator().manual_seed(0)))
    assert b.num_graphs == 8 and b.x.shape == (b.num_nodes, 3) and torch.equal(y, b.y)
    assert torch.all(b.x.sum(1) == 1)  # one-hot node labels


def test_fold_comes_from_the_config(tmp_path):
    write_tu(tmp_path, "NCI1")
    tasks = [load_task("nci1", str(tmp_path), config=TrainConfig.from_dict({"task": "nci1", "fold": f})) for f in (0, 3)]
    assert not set(tasks[0].outer.test) & set(tasks[1].outer.test)


def test_reddit_binary_without_node_features_gets_a_constant_feature(tmp_path):
    write_tu(tmp_path, "REDDIT-BINARY", node_labels=False)
    task = load_task("reddit_binary", str(tmp_path))
    assert task.in_features == 1
    b, _ = next(task.batches("outer", "test", 100, torch.device("cpu")))
    assert b.x.shape == (b.num_nodes, 1) and torch.all(b.x == 1)


@pytest.mark.parametrize("task, name", [("nci1", "NCI1"), ("reddit_binary", "REDDIT-BINARY")])
def test_graph_task_missing_files_is_one_clear_line(tmp_path, task, name):
    with pytest.raises(DataError) as e:
        load_task(task, str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and os.path.join(str(tmp_path), name, "raw") in msg
    assert f"{name}_A.txt" in msg and f"{name}_graph_indicator.txt" in msg and f"{name}_graph_labels.txt" in msg


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_gin_learns_the_structural_label_and_records_named_widths(tmp_path, model):
    write_tu(tmp_path, "REDDIT-BINARY", n_graphs=80, node_labels=False)
    cfg = TrainConfig.from_dict(
        {"task": "reddit_binary", "model": model, "data_root": str(tmp_path), "epochs": 15, "batch_size": 16, "width": 16, "conv_layers": 2, "rate": 0.1, "sigma_theta": 10.0, "lr": 0.003, "device": "cpu"}
    )  # lr 0.003: at Adam's 0.01 the weights of this separable toy task grow so fast that batch norm's running statistics lag and eval flips
    result = train(cfg)
    assert result.status == "ok"
    assert result.best_val_acc >= 0.875  # 8 validation graphs: at most one wrong; chance is 0.5
    record = result.history[-1]
    assert {"width_input", "width_conv0", "width_conv1"} <= set(record)
    assert record["width_total"] == record["width_input"] + record["width_conv0"] + record["width_conv1"]


def test_changed_raw_files_are_read_again_not_the_stale_processed_cache(tmp_path):
    """TUDataset reuses its processed cache even when the raw files changed:
    the loader rebuilds it, so a corrected dataset is what trains (and what
    a cross-validated comparison's folds digest checks)."""
    write_tu(str(tmp_path), "NCI1", n_graphs=40)
    first = load_task("nci1", str(tmp_path))
    assert os.path.isdir(tmp_path / "NCI1" / "processed")
    labels = tmp_path / "NCI1" / "raw" / "NCI1_graph_labels.txt"
    values = labels.read_text().split()
    values[0], values[1] = values[1], values[0]  # the first two graphs' labels swapped (a corrected file)
    labels.write_text("\n".join(values) + "\n")
    st = os.stat(labels)
    os.utime(labels, (st.st_atime, st.st_mtime + 5))
    second = load_task("nci1", str(tmp_path))
    assert second.labels[0] == first.labels[1] and second.labels[1] == first.labels[0]
    assert second.folds_digest != first.folds_digest
    third = load_task("nci1", str(tmp_path))  # unchanged since: the (new) cache serves
    assert (third.labels == second.labels).all()
