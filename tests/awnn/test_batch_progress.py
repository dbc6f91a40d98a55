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


def test_batches_per_epoch_count_examples_for_every_domain(tmp_path):
    """Text tasks count tokens in n_train: the total must count sentence pairs."""
    from data_helpers import write_multi30k

    write_multi30k(str(tmp_path))
    cfg = TrainConfig.from_dict({"task": "multi30k", "model": "fixed", "data_root": str(tmp_path), "epochs": 1, "batch_size": 64, "width": 16,
                                 "d_model": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "tokenizer": "word", "threads": 1})
    calls = []
    train(cfg, on_batch=lambda e, done, total, s: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] == len(calls)
