"""benchmarks/host_floor.py (issue #30): the what-if bound on the AWNN step
with its host-side checks stripped runs end to end on the fast path, and its
cached Adam check answers from the last real one."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from train_helpers import benchmark_module, needs_checked_torch

pytestmark = needs_checked_torch  # (the bound is of the fast step, on the lean Adam)

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_measures_both_steppers_and_the_floor_takes_the_fast_step():
    steps = 60
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_floor.py"), "--steps", str(steps), "--runs", "1"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for kind in ("product", "floor"):
        (run,) = result[kind]
        assert run["ratio_vs_lean"] > 0 and run["awnn_us"] > 0 and run["lean_fixed_us"] > 0
        assert result[f"ratio_vs_lean_{kind}"] == run["ratio_vs_lean"]
    # the warm-up (300) and the timed steps, all but the first (no Adam state yet) on FastStep
    assert result["floor_fast_steps"] >= 300 + steps - 1, result["floor_fast_steps"]


def test_the_floor_stepper_trains_the_same_model_the_product_step_does():
    """Stripped of its checks, the step computes what the product's does: two
    trainers of one config, stepped on the same batches, one each way, end
    with the same widths and bit for bit the same parameters (the same ops on
    the same tensors; only the checks around them differ)."""
    host_floor = benchmark_module("host_floor")
    from awnn.config import TrainConfig
    from awnn.data import load_task
    from awnn.train import Trainer

    torch.set_num_threads(1)
    task = load_task("spiralhard")
    cfg = {"task": "spiralhard", "split": "inner", "hidden_layers": 1, "activation": "relu", "batch_size": 64, "optimizer": "adam",
           "lr": 0.01, "device": "cpu", "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 100.0,
           "awnn_profile": "authors"}
    a, b = Trainer(TrainConfig.from_dict(cfg), task), Trainer(TrainConfig.from_dict(cfg), task)
    x, y = task.tensors("inner", "train", torch.device("cpu"))
    counter = [0]
    product, floor = host_floor.PRODUCT_STEPPER(a), host_floor.make_floor_stepper(b, counter)
    batches = [(x[s * 64 % 7168:][:64], y[s * 64 % 7168:][:64]) for s in range(120)]
    widths = set()
    for trainer, step in ((a, product), (b, floor)):
        torch.manual_seed(1)  # (a growth draws its new neurons from the global generator)
        for xb, yb in batches:
            step(xb, yb)
            widths.add(tuple(trainer.model.widths))
    assert len(widths) > 1, "no width moved: the test would not cover the refresh after a move"
    assert counter[0] == 119
    assert a.model.widths == b.model.widths
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(p, q), name


def test_the_cached_direct_answers_from_its_last_refresh_and_passes_the_rest_through():
    host_floor = benchmark_module("host_floor")

    class Opt:
        lean_steps = 0

        def __init__(self):
            self.calls = 0

        def direct(self, params):
            self.calls += 1
            return ("held", len(params))

    opt = Opt()
    cached = host_floor._CachedDirect(opt)
    assert cached.direct([1]) is None  # nothing checked yet
    cached.refresh([1, 2])
    assert cached.direct([]) == ("held", 2) and cached.direct([]) == ("held", 2) and opt.calls == 1
    cached.lean_steps += 1
    assert opt.lean_steps == 1 and cached.lean_steps == 1
