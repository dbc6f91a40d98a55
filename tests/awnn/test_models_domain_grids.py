"""The image, graph and text grids: the paper's configuration counts, and
every config builds the domain's model (tiny stand-in tasks, no data)."""
from __future__ import annotations

import pytest

from awnn.config import TrainConfig
from awnn.layers import adaptive_modules
from awnn.models import build_model
from search.grid import find_grid

SIZES = {  # (task, strategy): configs -- Table 4 (images), Table 5 (graphs), C.3 (text)
    **{(t, "fixed"): 5 for t in ("digits", "mnist", "cifar10", "cifar100", "multi30k")},
    **{(t, "awnn"): 1 for t in ("digits", "mnist", "cifar10", "cifar100", "multi30k")},
    ("nci1", "awnn"): 12,
    ("reddit_binary", "awnn"): 12,
    ("nci1", "fixed"): 24,
    ("reddit_binary", "fixed"): 24,
}


class Stand:
    def __init__(self, kind):
        self.kind = kind
        self.in_channels, self.in_features, self.num_classes, self.pad_id, self.max_len = 1, 3, 4, 0, 8


@pytest.mark.parametrize("task, strategy", sorted(SIZES))
def test_domain_grid_has_the_paper_size_and_every_config_builds(task, strategy):
    grid = find_grid(task, strategy)
    assert grid.size == SIZES[task, strategy]
    kind = {"nci1": "graph", "reddit_binary": "graph", "multi30k": "text"}.get(task, "image")
    for values in grid.configs():
        cfg = TrainConfig.from_dict(values)
        if kind == "text":  # the paper's 6+6 x 512 Transformer is large; its FFNs are what matters here
            cfg = cfg.replace(d_model=16, heads=2, encoder_layers=1, decoder_layers=1)
        model = build_model(cfg, Stand(kind))
        assert len(adaptive_modules(model)) == (0 if strategy == "fixed" else len(model.widths))
        if kind == "image" and strategy == "fixed":
            assert model.widths == ([] if cfg.width == 0 else [cfg.width])


def test_domain_grids_follow_the_paper_hyper_parameters():
    img = find_grid("cifar10", "awnn").configs()[0]
    assert (img["optimizer"], img["lr"], img["momentum"], img["weight_decay"], img["lr_milestones"]) == ("sgd", 0.1, 0.9, 0.0001, "50,100,150")
    assert (img["rate"], img["quantile_k"], img["sigma_theta"], img["activation"], img["augment"]) == (0.02, 0.9, 1.0, "leaky_relu", "crop_flip")
    g = find_grid("nci1", "awnn")
    assert (g.epochs, g.patience) == (1000, 500)
    gc = g.configs()[0]
    assert (gc["rate"], gc["sigma_theta"], gc["optimizer"], gc["lr"]) == (0.02, 10.0, "adam", 0.01)
    t = find_grid("multi30k", "awnn")
    tc = t.configs()[0]
    assert (t.epochs, t.patience, tc["rate"], tc["adam_eps"], tc["weight_decay"], tc["lr_gamma"]) == (500, 250, 0.004, 5e-9, 0.0005, 0.9)
    assert (tc["d_model"], tc["heads"], tc["encoder_layers"], tc["decoder_layers"], tc["dropout"], tc["select_metric"]) == (512, 8, 6, 6, 0.1, "loss")
