"""Helpers of the tests of awnn/ (tests/awnn/): a tiny tabular task and a
small training config, shared by the trainer's and the optimiser's tests."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from awnn.config import TrainConfig
from awnn.data import TensorTask, outer_inner_splits
from awnn.data.tabular import make_tabular


def tiny_task(name: str = "spiral", n: int = 240) -> TensorTask:
    """n points of a tabular task (balanced), with the paper's stratified splits."""
    x, y = make_tabular(name, 0)
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), n // 2, replace=False) for c in (0, 1)])
    x, y = x[idx], y[idx]
    outer, inner = outer_inner_splits(y, seed=0)
    return TensorTask(name, torch.from_numpy(x), torch.from_numpy(y).long(), outer, inner)


def config(**changes) -> TrainConfig:
    # rate 0.05: START (48) starting neurons, floor(46.05) + 2 in the default
    # `authors` profile (47 = ceil in paper-text); ~6 steps per epoch on the tiny task
    return TrainConfig.from_dict({"task": "spiral", "batch_size": 32, "rate": 0.05, "epochs": 3, "device": "cpu", **changes})


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one intra-op thread is faster, and far faster on a busy
    machine.  A test module uses it with `from train_helpers import one_thread`
    and `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
