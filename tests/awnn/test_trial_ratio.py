"""benchmarks/trial_ratio.py (issue #30): whole AWNN trials against fixed-grid
trials of their mean width.  Its per-epoch figures are over the epochs each
run ran (an AWNN run that reaches max_width stops early), and the fixed arm
trains at the AWNN run's mean width, in the lean loop."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from train_helpers import benchmark_module, needs_checked_torch

pytestmark = needs_checked_torch  # (the AWNN trial takes the fast step, on the lean Adam)

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    return benchmark_module("trial_ratio")


def test_seconds_per_epoch_are_over_the_epochs_a_run_ran_not_the_ones_it_was_given():
    tr = _benchmark()
    stopped = SimpleNamespace(train_seconds=3.0, history=[{}, {}])  # a run given 150 epochs that stopped after 2
    assert tr.per_epoch(stopped) == 1.5


def test_the_mean_width_is_per_hidden_layer_over_the_epochs():
    tr = _benchmark()
    history = [{"width_total": 200}, {"width_total": 300}, {"width_total": 700}]
    assert tr.mean_width(history, 2) == pytest.approx(200.0)


def test_the_script_trains_both_arms_at_the_awnns_mean_width_and_reports_the_ratio():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trial_ratio.py"), "--epochs", "4", "--repeats", "2",
                          "--activations", "relu6"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    c = result["configs"]["1_layers_relu6"]
    assert c["fixed_width"] == max(1, round(c["mean_width"])) and c["fixed_width"] > 1
    assert c["epochs_run"] == {"awnn": 4, "fixed": 4} and c["status"] == {"awnn": "ok", "fixed": "ok"}
    assert c["awnn_s_per_epoch"] > 0 and c["fixed_s_per_epoch"] > 0
    assert c["ratio"] == pytest.approx(c["awnn_s_per_epoch"] / c["fixed_s_per_epoch"], rel=0.01)
    assert result["ratios"] == [c["ratio"]] and result["flush_denormal"] is True
    # each arm ran twice (rounds alternate their order), and stderr says which arm each run was
    assert out.stderr.count("relu6, awnn:") == 2 and out.stderr.count("relu6, fixed:") == 2


def test_bad_counts_are_refused_in_one_line():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trial_ratio.py"), "--epochs", "0"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode != 0 and "--epochs and --repeats must be at least 1" in out.stderr
