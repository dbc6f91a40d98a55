"""benchmarks/step_floor.py (issue #30): the inline 1-layer AWNN step it times
as the Python floor must compute the product step's update, or its figure
means nothing; the script checks that itself and fails otherwise."""
import json
import subprocess
import sys
from pathlib import Path

from train_helpers import benchmark_module, needs_checked_torch

pytestmark = needs_checked_torch  # (the product step it checks against is the fast step)

ROOT = Path(__file__).resolve().parents[2]


def test_the_floor_step_agrees_with_the_product_step_and_the_script_reports_both():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_floor.py"), "--windows", "1", "--per-window", "5", "--check", "8"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["check_steps"] == 8 and 0.0 <= result["check_max_abs_diff"] <= 1e-4
    for key in ("product", "floor", "lean"):
        assert result[f"{key}_us_median"] > 0
    assert result["ratio_floor_vs_lean"] > 0 and result["width"] > 1


def test_the_check_fails_a_floor_step_that_computes_something_else():
    """(The check can fail: a floor whose Adam decays twice as much disagrees.)"""
    step_floor = benchmark_module("step_floor")
    import torch

    from awnn.config import TrainConfig
    from awnn.data import load_task
    from awnn.train import Trainer

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    x, y = load_task("spiralhard").tensors("inner", "train", cpu)
    trainer = Trainer(TrainConfig.from_dict(step_floor.AWNN))
    trainer._fast.native = None  # (the floor is the torch ops' arithmetic, as the script checks it)
    it = step_floor.batches(x, y, 128, cpu, torch.Generator().manual_seed(0))
    product = step_floor.make_stepper(trainer)
    for _ in range(20):
        product(*next(it))
    assert step_floor.check(trainer, step_floor.make_floor_step(trainer), product, it, 3) <= 1e-4
    trainer._prior_decay *= 2
    wrong = step_floor.make_floor_step(trainer)
    trainer._prior_decay /= 2
    assert step_floor.check(trainer, wrong, product, it, 3) > 1e-6
