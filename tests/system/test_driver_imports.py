"""The driver of a tabular comparison never imports torch: its data is
generated from the seed (nothing to check on the driver), and what it needs
of the trainer's rules - grids, which configs fuse (awnn/fusable.py), task
kinds - is torch-free.  torch cost each driver start 1.4 CPU-s and ~200 MB;
the trials import it in the workers.  A comparison whose data is read from
files loads it on the driver, with torch, and fails there in seconds when it
is missing (tests/system/test_real_data.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from fault_helpers import write_inputs

pytestmark = pytest.mark.slow

FIXED = """\
task: doublemoon
strategy: fixed
epochs: 100
retrain_runs: 1
fixed: {model: fixed, optimizer: adam, batch_size: 128, hidden_layers: 1, activation: relu}
grid:
  width: [8, 16]
  lr: [0.1, 0.01]
"""


def _imports(args: list[str], cwd) -> set[str]:
    """Every module the driver process of `awnn ARGS` imported (python -X importtime; it is not passed on to Ray's processes)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "search.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "Report:" in p.stdout, p.stdout[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}


def test_a_tabular_comparisons_driver_never_imports_torch(tmp_path):
    grids, budget = write_inputs(tmp_path, epochs=2)  # three AWNN configs
    write_inputs(tmp_path, epochs=2, grid=FIXED, strategy="fixed")  # four fixed ones, fused (--fuse 4)
    imported = _imports(["compare", "--task", "doublemoon", "--strategies", "fixed,awnn", "--budget", str(budget), "--grid-dir", str(grids),
                         "--storage", str(tmp_path / "results"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--num-cpus", "2",
                         "--fuse", "4", "--report-interval", "0"], tmp_path)
    assert {"search.sweep", "search.fusion", "awnn.fusable", "awnn.data", "ray.tune", "mlflow"} <= imported  # (the listing is whole)
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}
