"""Graphs without node features whose sizes span two orders of magnitude
(REDDIT-BINARY): with sum pooling, batch-normalised read-outs keep the test
loss on the scale of the training loss (issue #16).  Without them the logits
of large graphs explode: on this generated set the test loss is hundreds of
times larger for the same accuracy range."""
from __future__ import annotations

import pytest

from awnn.config import TrainConfig
from awnn.train import train
from data_helpers import write_social
from search.grid import find_grid

pytest.importorskip("torch_geometric", reason="the graph tasks need torch-geometric")


@pytest.fixture(scope="module")
def social(tmp_path_factory):
    root = tmp_path_factory.mktemp("social")
    write_social(str(root), n_graphs=200)
    return str(root)


def run(root, model, norm):
    cfg = TrainConfig.from_dict({"task": "reddit_binary", "model": model, "data_root": root, "epochs": 20, "conv_layers": 4, "pooling": "sum",
                                 "readout_norm": norm, "width": 32, "batch_size": 32, "threads": 1, "lr": 0.01, "rate": 0.02, "sigma_theta": 10.0})
    r = train(cfg)
    return r, r.history[r.best_epoch - 1]


def test_fixed_gin_test_loss_stays_near_its_training_loss(social):
    r, best = run(social, "fixed", "batch")
    assert r.status == "ok" and r.test_acc > 0.6
    assert r.test_loss < 2 * best["train_loss"] and r.test_loss < 2 * best["val_loss"]
    plain, _ = run(social, "fixed", "none")
    assert plain.test_loss > 5 * r.test_loss  # the defect the read-out norm removes


def test_awnn_gin_test_loss_stays_near_its_validation_loss(social):
    r, best = run(social, "awnn", "batch")  # (AWNN's train_loss holds the prior terms: compared with the validation loss)
    assert r.status == "ok" and r.test_loss < 3 * best["val_loss"]


def test_reddit_grids_use_it_and_nci1_does_not():
    for strategy in ("fixed", "awnn"):
        assert find_grid("reddit_binary", strategy).fixed["readout_norm"] == "batch"
        assert "readout_norm" not in find_grid("nci1", strategy).fixed
