"""Progress inside an epoch (issue #16): `Trainer.run(on_batch=...)` is
told after every training batch where the epoch is, and listening changes
nothing about the training."""
from __future__ import annotations

import math

from awnn.config import TrainConfig
from awnn.train import train


def test_on_batch_counts_each_epochs_batches_and_changes_nothing():
    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "awnn", "epochs": 2, "batch_size": 256, "threads": 1})
    calls = []
    with_progress = train(cfg, on_batch=lambda e, done, total, s: calls.append((e, done, total, s)))
    plain = train(cfg)
    n_train = with_progress.summary()["n_train"]
    total = math.ceil(n_train / 256)
    assert [(e, d, t) for e, d, t, _ in calls] == [(e, d, total) for e in (1, 2) for d in range(1, total + 1)]
    seconds = [s for _, _, _, s in calls]
    assert all(b >= a for a, b in zip(seconds[:total], seconds[1:total])) and all(s >= 0 for s in seconds)
    a, b = with_progress.summary(), plain.summary()
    assert (a["best_val_acc"], a["test_acc"], a["widths"]) == (b["best_val_acc"], b["test_acc"], b["widths"])
