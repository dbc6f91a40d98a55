"""benchmarks/compiled_step.py (issue #30): its compiled steps must compute
what the eager ones compute (the script checks it and fails otherwise), or
its ratios mean nothing."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import needs_checked_torch

pytestmark = needs_checked_torch  # (its floor step is the fast step's)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="torch.compile's CPU backend needs a C++ compiler")
def test_the_compiled_steps_agree_with_the_eager_ones_and_the_script_reports_the_ratios():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compiled_step.py"), "--windows", "1", "--per-window", "5", "--check", "6"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["check_steps"] == 6
    assert 0.0 <= result["check_max_abs_diff"]["awnn"] <= 1e-3 and 0.0 <= result["check_max_abs_diff"]["lean"] <= 1e-3  # (CHECK_TOL)
    for key in ("awnn_eager", "awnn_compiled", "lean_eager", "lean_compiled"):
        assert result[f"{key}_us_median"] > 0
    assert result["ratio_awnn_compiled_vs_lean_eager"] > 0 and result["awnn_compile_s"] > 0 and result["mean_width"] > 1
