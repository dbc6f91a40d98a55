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


def _imports_of_a_refusal(args: list[str], cwd) -> tuple[set[str], str]:
    """The modules the driver of `awnn ARGS` imported before it refused its input (exit 2), and its last line."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "search.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    lines = [line for line in p.stderr.splitlines() if not line.startswith("import time:")]
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], "\n".join(lines)[-3000:])
    return {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}, lines[-1]


_BAD_BUDGET = "epoch_scale: 0\nmin_epochs: 2\nmax_epocs: 2\n"  # a typo'd key
_BAD_GRID = FIXED.replace("width: [8, 16]", "width: [8, -16]")


@pytest.mark.parametrize("case,says", [
    ("unknown task", "no grid for task 'doublemon'"),
    ("budget file with a typo'd key", "max_epocs"),
    ("budget file missing", "nope.yaml"),
    ("grid with a negative width", "-16"),
    ("--fuse 0", "--fuse: expected an integer >= 1"),
    ("--strategies with a typo", "found 'randm'"),
])
@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_bad_input_is_refused_before_ray_tune_mlflow_or_torch_load(tmp_path, command, case, says):
    """A typo is refused in well under a second (0.7 s against 1.6 s when search/sweep.py imported Ray Tune's searcher at
    its top, 2026-12-07): the driver reads its inputs before it loads Ray Tune, MLflow or torch, the ~4 CPU-s of a start."""
    grids, budget = write_inputs(tmp_path, epochs=2, grid=_BAD_GRID if case.startswith("grid") else FIXED, strategy="fixed")
    if case.startswith("budget file with"):
        budget.write_text(_BAD_BUDGET)
    task = "doublemon" if case == "unknown task" else "doublemoon"
    args = [command, "--task", task, "--budget", "nope.yaml" if case == "budget file missing" else str(budget), "--grid-dir", str(grids),
            "--storage", str(tmp_path / "results"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    if command == "compare":
        args += ["--strategies", "fixed,randm" if case == "--strategies with a typo" else "fixed"]
    elif case == "--strategies with a typo":
        args += ["--strategy", "randm"]
        says = "found 'randm'"
    else:
        args += ["--strategy", "fixed"]
    if case == "--fuse 0":
        args += ["--fuse", "0"]
    imported, last = _imports_of_a_refusal(args, tmp_path)
    assert says in last, last
    assert "search.cli" in imported or "search.commands" in imported, sorted(imported)[:20]  # (the listing is there)
    loaded = {m for m in imported if m.split(".")[0] in ("torch", "mlflow") or m == "ray.tune" or m.startswith("ray.tune.")}
    assert not loaded, sorted(loaded)[:20]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "results").exists()
