"""benchmarks/step_overhead.py (issue #30): the script runs end to end and
its figures hang together: each window's ratio, their median and range, and
the read-out layout check, measured at the AWNN's own width on the tensors
of both arms' steps."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from train_helpers import benchmark_module, needs_checked_torch

pytestmark = needs_checked_torch  # (the AWNN step it times is the fast step, on the lean Adam)

ROOT = Path(__file__).resolve().parents[2]
# a SpiralHard MLP of one hidden layer as the script builds it (batch set per test)
BASE = {"task": "spiralhard", "split": "inner", "hidden_layers": 1, "activation": "relu", "optimizer": "adam", "lr": 0.01, "device": "cpu"}


def _benchmark():
    """benchmarks/step_overhead.py as a module."""
    return benchmark_module("step_overhead")


def test_the_script_reports_paired_ratios_inside_their_range_and_the_layout_check():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_overhead.py"), "--device", "cpu", "--steps", "50"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("1_layer", "4_layers"):
        low, high = result[f"ratio_vs_lean_window_range_{key}"]
        assert 0 < low <= result[f"ratio_vs_lean_paired_{key}"] <= high
        assert result[f"ratio_vs_lean_{key}"] > 0 and result[f"layout_asymmetry_{key}"] > 0
        products = result[f"products_us_{key}"]
        assert set(products) == {"awnn", "fixed"} and all(v > 0 for arm in products.values() for v in arm.values())
    assert "read-out products (us) at width" in out.stderr
    for key in ("1_layer", "4_layers"):  # the width moves' split (50 steps: the widths move in both layers' runs)
        if f"awnn_moving_us_{key}" in result:
            assert result[f"awnn_still_us_{key}"] > 0 and result[f"awnn_moving_us_{key}"] > 0
            assert result[f"ratio_vs_lean_without_moves_{key}"] > 0
    assert any(f"awnn_moving_us_{key}" in result for key in ("1_layer", "4_layers")), result


def test_the_width_move_split_is_the_moves_share_of_the_excess():
    step_overhead = _benchmark()
    # 4 steps, 1 moved (fraction 1/4) costing 200 us more than a still step of 100 us; AWNN median 100, lean 50: excess 50
    r = step_overhead.width_move_split([100e-6, 100e-6, 300e-6, 100e-6], [False, False, True, False], 100e-6, 50e-6)
    assert r == {"awnn_still_us": 100.0, "awnn_moving_us": 300.0, "width_move_share_of_excess": 1.0, "ratio_vs_lean_without_moves": 2.0}
    assert step_overhead.width_move_split([1e-4, 2e-4], [False, False], 1e-4, 5e-5) == {}  # no move: nothing to split
    assert step_overhead.width_move_split([1e-4, 2e-4], [False, True], 1e-4, 2e-4)["width_move_share_of_excess"] is None  # no excess


def test_the_cold_step_script_times_the_fast_step_after_each_kind_of_work():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cold_step.py"), "--steps", "40", "--rounds", "1", "--train", "40"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for mode in ("none", "resize", "other"):
        assert result[f"step_us_{mode}"] > 0
        assert abs(result[f"penalty_us_{mode}"] - (result[f"step_us_{mode}"] - result["step_us_none"])) < 0.2
    assert result["penalty_us_none"] == 0.0
    # the training steps' split: 40 steps from the start move the width at some steps, not at others
    assert 0 < result["train_moves"] < result["train_steps"] == 40
    cost = result["train_update_moving_us"] - result["train_update_still_us"] + result["train_step_moving_us"] - result["train_step_still_us"]
    assert abs(result["move_cost_us"] - cost) < 0.5
    assert abs(result["move_cost_of_still"] - cost / (result["train_update_still_us"] + result["train_step_still_us"])) < 0.01
    assert result["between_us_resize"] > 1.0 and result["between_us_other"] > 1.0 and result["between_us_none"] < result["between_us_resize"]


def test_the_layout_check_builds_the_fixed_side_at_the_awnns_width():
    step_overhead = _benchmark()
    from awnn.config import TrainConfig
    from awnn.lean import LeanTrainer
    from awnn.train import Trainer

    torch.set_num_threads(1)
    base = {**BASE, "batch_size": 32}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.05, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}))
    asked = []

    def make_lean(width):
        asked.append(width)
        return LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))

    r = step_overhead.read_out_products(awnn, make_lean, 32)
    assert asked == [awnn.model.widths[-1]] == [r["width"]]
    shown = sum(r["us"]["fixed"].values()) / sum(r["us"]["awnn"].values())  # (from the medians rounded to 0.1 us)
    assert r["asymmetry"] > 0 and abs(r["asymmetry"] - shown) <= 0.03 * shown


def test_the_op_count_splits_still_and_moving_steps_and_counts_the_lean_step():
    step_overhead = _benchmark()
    from awnn.config import TrainConfig
    from awnn.data import load_task
    from awnn.lean import LeanTrainer
    from awnn.train import Trainer

    torch.set_num_threads(1)
    base = {**BASE, "batch_size": 128}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}))
    lean = LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": 64}))
    x, y = load_task("spiralhard").tensors("inner", "train", torch.device("cpu"))
    it = step_overhead.batches(x, y, 128, torch.device("cpu"), torch.Generator().manual_seed(0))
    r = step_overhead.count_cpu_ops(awnn, lean, it, n=60)
    assert r["lean_ops"] > 10 and r["awnn_ops_still"] > 10 and r["dispatch_us"] > 0
    # 60 steps of a fresh AWNN at lr 0.01: its width moves at some steps and keeps at others; a move resizes (more ops)
    assert r["awnn_ops_moving"] is not None and r["awnn_ops_still"] is not None, r
    assert r["awnn_ops_moving"] > r["awnn_ops_still"], r
    assert r["awnn_ops_still"] <= r["awnn_ops_mean"] <= r["awnn_ops_moving"]
    assert "aten::mm" in r["awnn_top_ops"] or "aten::addmm" in r["awnn_top_ops"], r["awnn_top_ops"]
