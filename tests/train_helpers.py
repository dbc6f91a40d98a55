"""Helpers of the tests of awnn/ (tests/awnn/): a tiny tabular task and a
small training config, shared by the trainer's and the optimiser's tests."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import awnn.lean_adam as lean_adam
from awnn.config import TrainConfig
from awnn.data import TensorTask, outer_inner_splits
from awnn.data.tabular import make_tabular


CHECKED_TORCH = torch.__version__.startswith(lean_adam.TESTED_TORCH) and hasattr(torch, "_fused_adam_")

# The lean paths (LeanAdam's kernel, the stacked Adam's kernel, the `authors`
# fast step) use torch internals checked against the versions in
# awnn/lean_adam.py's TESTED_TORCH; on any other torch the product trains with
# torch.optim.Adam (the reference, which every other test exercises), so a test
# of a lean path has nothing to test there and is skipped, saying why.  `make
# test` installs a checked torch, and tests/awnn/test_lean_adam_unchecked.py
# fails there if it is not one.
needs_checked_torch = pytest.mark.skipif(
    not CHECKED_TORCH,
    reason=f"torch {torch.__version__} is not one awnn/lean_adam.py was checked against {lean_adam.TESTED_TORCH}: "
           "the product takes torch.optim.Adam there, and this test is about the lean path")


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


# The fixed-MLP runs that awnn/stacked.py and awnn/lean.py are compared on
# against the Trainer (tests/awnn/test_stacked.py, test_lean.py)
F64_TOL = 1e-9  # float64 trajectories: the tolerance and why at the top of tests/awnn/test_stacked.py


@pytest.fixture(scope="module")
def task():
    return tiny_task("doublemoon", 400)


@pytest.fixture
def task64(task):
    """The task in float64, with float64 the default dtype while the test runs
    (models, optimiser state and accumulators are built in it)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})  # (a fresh cache: no float32 tensors)
    torch.set_default_dtype(old)


def fixed_config(**changes) -> TrainConfig:
    """A small fixed MLP on DoubleMoon (2 x 16, batch 32, 4 epochs, CPU)."""
    base = {"task": "doublemoon", "model": "fixed", "hidden_layers": 2, "width": 16, "batch_size": 32, "epochs": 4, "device": "cpu"}
    return TrainConfig.from_dict({**base, **changes})


def every_trainer_path(device: str) -> dict:
    """Each way a trial trains, 2 epochs on DoubleMoon on `device`: the Trainer
    (fixed, AWNN), the lean loop (an unfused fixed-grid trial) and a fused group
    of 2 configs (the stacked trainer: `--fuse`, 32 by default on GPU trials).
    Returns {path: every epoch record it gave}."""
    from awnn.lean import LeanTrainer
    from awnn.stacked import StackedTrainer
    from awnn.train import Trainer

    base = {"task": "doublemoon", "epochs": 2, "batch_size": 64, "hidden_layers": 1, "lr": 0.01, "device": device}
    fixed = {**base, "model": "fixed", "width": 16}
    out = {
        "trainer-fixed": Trainer(TrainConfig.from_dict(fixed)).run().history,
        "trainer-awnn": Trainer(TrainConfig.from_dict({**base, "model": "awnn"})).run().history,
        "lean": LeanTrainer(TrainConfig.from_dict(fixed)).run().history,
    }
    records: list = []
    StackedTrainer([TrainConfig.from_dict(fixed), TrainConfig.from_dict({**fixed, "activation": "tanh"})]).run(lambda i, r: records.append(r))
    out["fused"] = records
    return out


def benchmark_module(name: str):
    """benchmarks/<name>.py imported as a module (the benchmarks are scripts, not a package)."""
    import importlib
    import sys
    from pathlib import Path

    where = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, where)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(where)
