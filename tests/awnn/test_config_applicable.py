"""TrainConfig.applicable: the keys a run shows as MLflow params (issue #17)."""
from __future__ import annotations

import math

import pytest

from awnn.config import AWNN_KEYS, COMMON_KEYS, COMPRESSION_KEYS, DOMAIN_KEYS, OPTIMISER_KEYS, PROFILE_KEYS, TABLE_KEYS, TrainConfig
from awnn.data import TASKS, task_kind


def test_every_key_has_a_group():
    grouped = set(COMMON_KEYS) | set(AWNN_KEYS) | set(PROFILE_KEYS) | set(COMPRESSION_KEYS) | set(OPTIMISER_KEYS)
    grouped |= {k for keys in DOMAIN_KEYS.values() for k in keys}
    assert grouped == set(TrainConfig.keys())  # a new key must say where it applies


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_applicable_keys_by_model_and_domain(task, model):
    kind = task_kind(task)
    cfg = TrainConfig.from_dict({"task": task, "model": model})
    p = cfg.applicable(kind)
    own = set(DOMAIN_KEYS[kind]) - (set(TABLE_KEYS) if task != "table" else set())  # (a CSV file's columns: task table only)
    assert set(COMMON_KEYS) <= set(p) and own <= set(p) and all((k in p) == (task == "table") for k in TABLE_KEYS)
    others = {k for k2, keys in DOMAIN_KEYS.items() if k2 != kind for k in keys} - set(DOMAIN_KEYS[kind])
    assert not others & set(p)
    if model == "awnn":
        assert "width" not in p and set(AWNN_KEYS) | set(PROFILE_KEYS) <= set(p)
    else:
        assert "width" in p and not (set(AWNN_KEYS) - set(COMMON_KEYS)) & set(p)
    assert p == {k: getattr(cfg, k) for k in p}  # the values are the config's


def test_optimiser_schedule_and_compression_keys_follow_their_switches():
    adam = TrainConfig.from_dict({"task": "doublemoon", "optimizer": "adam"}).applicable("tabular")
    assert "adam_eps" in adam and "momentum" not in adam and "lr_milestones" not in adam and "lr_gamma" not in adam
    sgd = TrainConfig.from_dict({"task": "doublemoon", "optimizer": "sgd", "lr_schedule": "multistep", "lr_milestones": "5,10"}).applicable("tabular")
    assert {"momentum", "lr_milestones", "lr_gamma"} <= set(sgd) and "adam_eps" not in sgd
    off = TrainConfig.from_dict({"task": "doublemoon"}).applicable("tabular")
    on = TrainConfig.from_dict({"task": "doublemoon", "compress_start_epoch": 3, "compress_end_epoch": 6}).applicable("tabular")
    assert not set(COMPRESSION_KEYS) & set(off) and set(COMPRESSION_KEYS) <= set(on)


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_elbo_parts_add_up_to_the_training_loss(model):
    from awnn.train import Trainer

    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": model, "width": 8, "epochs": 3, "sigma_theta": 1.0})
    records = []
    Trainer(cfg).run(on_epoch=records.append)
    for r in records:
        assert math.isfinite(r["train_nll"]) and r["train_nll"] > 0
        if model == "awnn":  # the priors' terms are what the AWNN adds to the data term
            assert r["train_nll"] + r["train_prior"] == pytest.approx(r["train_loss"]) and r["train_prior"] != 0
        else:  # a fixed network's objective is its data term
            assert "train_prior" not in r and r["train_nll"] == pytest.approx(r["train_loss"])
