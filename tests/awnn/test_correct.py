"""awnn/correct.py: an epoch's correct training predictions counted a chunk
of batches at a time give the count taken after every batch, and whole
training runs on every path record the same training accuracy either way."""
import pytest
import torch

import awnn.correct as correct
from awnn.config import TrainConfig
from awnn.correct import CorrectCounter
from awnn.lean import LeanTrainer
from awnn.train import Trainer

from train_helpers import tiny_task


def _per_batch(outs, ys, dim):
    return sum((o.argmax(-1) == y).sum(dim) for o, y in zip(outs, ys))


@pytest.mark.parametrize("shape", [(), (3,)], ids=["one model", "a stack of 3"])
@pytest.mark.parametrize("limit", [0, 1, 700, 10**9])
def test_chunks_of_any_size_count_what_each_batch_counts(shape, limit):
    g = torch.Generator().manual_seed(0)
    batches = [33, 33, 33, 7]  # (the last batch of an epoch is smaller)
    outs = [torch.randn(*shape, b, 5, generator=g) for b in batches]
    ys = [torch.randint(0, 5, (*shape, b), generator=g) for b in batches]
    outs[1][..., :4, :] = 0.0  # ties: argmax takes the first class, as per batch
    counter = CorrectCounter(shape, torch.device("cpu"), limit=limit)
    for o, y in zip(outs, ys):
        counter.add(o, y)
    dim = len(shape)
    got = counter.total()
    assert got.shape == torch.Size(shape) and got.dtype == torch.long
    assert torch.equal(got, _per_batch(outs, ys, dim))
    assert torch.equal(counter.total(), got)  # (counted once: a second total adds nothing)


def test_a_chunk_is_counted_when_it_reaches_the_limit_and_nothing_is_held_after():
    counter = CorrectCounter((), torch.device("cpu"), limit=20)
    counter.add(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long))  # 8 logits: held
    assert int(counter.count) == 0 and counter._held == 8
    counter.add(torch.zeros(6, 2), torch.ones(6, dtype=torch.long))  # 20: counted
    assert int(counter.count) == 4 and counter._held == 0 and not counter._outs


@pytest.mark.parametrize("path", ["fast", "written-out", "autograd", "lean"])
def test_whole_runs_record_the_same_training_accuracy_in_chunks_as_after_every_batch(path, monkeypatch):
    """Every training path's logits stay as returned (a chunk reads them later):
    a run counting in chunks and one counting after every batch record the same
    epochs, training accuracy included."""
    task = tiny_task()
    base = {"task": "spiral", "split": "inner", "hidden_layers": 1, "activation": "relu", "batch_size": 16, "optimizer": "adam",
            "lr": 0.01, "device": "cpu", "epochs": 4}
    cfg = {**base, "model": "fixed", "width": 12} if path == "lean" else \
          {**base, "model": "awnn", "rate": 0.05, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}
    histories = []
    for limit in (correct.LIMIT, 0):
        monkeypatch.setattr(correct, "LIMIT", limit)
        if path == "lean":
            t = LeanTrainer(TrainConfig.from_dict(cfg), task)
        else:
            monkeypatch.setattr(Trainer, "fast_step", path == "fast")
            monkeypatch.setattr(Trainer, "written_out_step", path != "autograd")
            t = Trainer(TrainConfig.from_dict(cfg), task)
            assert (t._fast is not None) == (path == "fast")
        t.run()
        histories.append([{k: v for k, v in r.items() if "seconds" not in k} for r in t.history])
    chunked, per_batch = histories
    assert 0 < chunked[-1]["train_acc"] <= 1
    assert chunked == per_batch
