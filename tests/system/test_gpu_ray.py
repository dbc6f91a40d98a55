"""The GPU path (#19): GPU-hours of a real sweep (real Ray, real MLflow).

Needs a CUDA device and is skipped cleanly without one (CI has none); run it
with `pytest -m gpu` on a GPU machine.  The CUDA tests without Ray are in
tests/system/test_gpu.py."""
from __future__ import annotations

import json

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

GRID = """\
task: doublemoon
strategy: {strategy}
epochs: 100
retrain_runs: 1
fixed: {{model: {model}, batch_size: 32, hidden_layers: 1, lr: 0.01, width: 16}}
grid:
  activation: [relu, leaky_relu]
"""


@pytest.mark.parametrize("share", [0.5, 0.0], ids=["gpu-half", "cpu-only"])
def test_sweep_gpu_hours_are_training_seconds_times_gpu_share(tmp_path, share):
    """A GPU trial's gpu_hours = its compute seconds x its GPU share / 3600 and
    device_hours the same; a CPU-only trial logs gpu_hours 0 and device_hours =
    compute seconds x its CPUs / 3600.  A trial that trains on the GPU records
    its peak GPU memory every epoch (`gpu_mem_mib`), one on the CPU does not."""
    from conftest import run_awnn
    from mlflow.tracking import MlflowClient

    grids = tmp_path / "grids"
    grids.mkdir()
    (grids / "doublemoon-fixed.yaml").write_text(GRID.format(strategy="fixed", model="fixed"))
    budget = tmp_path / "budget.yaml"
    budget.write_text("epoch_scale: 0\nmin_epochs: 5\nmax_epochs: 5\nretrain_runs: 1\n")
    args = ["sweep", "--task", "doublemoon", "--strategy", "fixed", "--budget", str(budget), "--grid-dir", str(grids),
            "--storage", str(tmp_path / "results"), "--num-cpus", "4", "--cpus-per-trial", "2"]
    if share:
        args += ["--gpus-per-trial", str(share)]
    run_awnn(args, cwd=tmp_path, check=True, timeout=300)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("awnn-doublemoon")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    assert len(trials) == 3  # 2 selection + 1 re-training run
    for t in trials:
        m = t.data.metrics
        assert t.data.tags["awnn.status"] == "ok", t.data.tags.get("awnn.error")
        assert m["compute_seconds"] == pytest.approx(m["train_seconds"], rel=1e-6)  # one attempt: its training time
        assert m["gpu_hours"] == pytest.approx(m["compute_seconds"] * share / 3600, rel=1e-9, abs=0.0)
        per = share if share else 2.0
        assert m["wall_device_hours"] == pytest.approx(m["compute_seconds"] * per / 3600, rel=1e-9)
        # a GPU trial's device-hours are its wall figure; a CPU trial's its CPU seconds, capped at wall x its 2 CPUs
        expect = m["compute_seconds"] * per if share else min(m["cpu_seconds"], m["compute_seconds"] * per)
        assert m["device_hours"] == pytest.approx(expect / 3600, rel=1e-9)
        assert (m.get("gpu_mem_mib", 0.0) > 0) == bool(share), m.get("gpu_mem_mib")
    sweeps = [r for r in runs if r.data.tags.get("awnn.kind") == "sweep"]
    total = sum(t.data.metrics["gpu_hours"] for t in trials)
    assert sum(s.data.metrics["gpu_hours"] for s in sweeps) == pytest.approx(total, rel=1e-9, abs=0.0)
    if share:
        assert total > 0
    print(json.dumps({"share": share, "gpu_hours": total}))
