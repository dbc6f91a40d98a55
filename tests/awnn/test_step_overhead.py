"""benchmarks/step_overhead.py (issue #30): the script runs end to end and
its figures hang together: each window's ratio, their median and range, and
the read-out layout check, measured at the AWNN's own width on the tensors
of both arms' steps."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from train_helpers import needs_checked_torch

pytestmark = needs_checked_torch  # (the AWNN step it times is the fast step, on the lean Adam)

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_layout_check_builds_the_fixed_side_at_the_awnns_width():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import step_overhead
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from awnn.config import TrainConfig
    from awnn.lean import LeanTrainer
    from awnn.train import Trainer

    torch.set_num_threads(1)
    base = {"task": "spiralhard", "split": "inner", "hidden_layers": 1, "activation": "relu", "batch_size": 32, "optimizer": "adam",
            "lr": 0.01, "device": "cpu"}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.05, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}))
    asked = []

    def make_lean(width):
        asked.append(width)
        return LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))

    r = step_overhead.read_out_products(awnn, make_lean, 32)
    assert asked == [awnn.model.widths[-1]] == [r["width"]]
    shown = sum(r["us"]["fixed"].values()) / sum(r["us"]["awnn"].values())  # (from the medians rounded to 0.1 us)
    assert r["asymmetry"] > 0 and abs(r["asymmetry"] - shown) <= 0.03 * shown
