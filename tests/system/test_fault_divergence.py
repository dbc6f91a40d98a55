"""Trials that go wrong by themselves, in a real sweep: a diverging config
(lr 1e6: the loss becomes NaN/inf) stops early and is tagged `diverged`, a
config whose rate asks for more neurons than `max_width` is stopped there
and tagged `width_capped`; their compute is counted, the sweep goes on, and
selection ignores the diverged one.  A config too large for the machine's
memory fails in one line per attempt, not Ray's traceback, and the summary
says why."""
from __future__ import annotations

import json

import pytest

from conftest import run_awnn
from fault_helpers import sweep_args, trial_runs, write_inputs

pytestmark = pytest.mark.slow

EPOCHS = 20
MAX_WIDTH = 2000  # rate 0.01 starts at 231 neurons (k = 0.9); rate 1e-4 would need 23,026

GRID = f"""\
task: doublemoon
strategy: awnn
epochs: 100
retrain_runs: 1
fixed: {{model: awnn, batch_size: 128, hidden_layers: 1, quantile_k: 0.9, rate_prior: uninformative, max_width: {MAX_WIDTH}, on_max_width: stop}}
grid:
  lr: [0.01, 1000000.0]
  rate: [0.01, 0.0001]
"""


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_fault_diverged_and_width_capped_trials_are_tagged_counted_and_not_selected(tmp_path):
    grids, budget = write_inputs(tmp_path, EPOCHS, grid=GRID)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = run_awnn(sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"]), cwd=tmp_path, timeout=280, check=True)
    runs = {r.data.tags["awnn.trial_key"]: r for r in trial_runs(tracking)}
    assert sorted(runs) == ["ass-01", "sel-0000", "sel-0001", "sel-0002", "sel-0003"]
    status = {k: r.data.tags["awnn.status"] for k, r in runs.items()}
    # grid order: (lr 0.01, rate 0.01), (0.01, 1e-4), (1e6, 0.01), (1e6, 1e-4)
    assert status["sel-0000"] == "ok" and status["sel-0002"] == "diverged"
    assert status["sel-0001"] == "width_capped" and status["sel-0003"] in ("width_capped", "diverged")
    diverged = runs["sel-0002"]
    assert diverged.data.metrics["epochs_run"] < EPOCHS  # stopped early
    assert diverged.info.status == "FINISHED"  # an outcome, not a crash
    for key in ("sel-0001", "sel-0002", "sel-0003"):
        m = runs[key].data.metrics
        assert m["compute_seconds"] > 0 and m["wall_device_hours"] == pytest.approx(m["compute_seconds"] / 3600)  # cost counted
        assert 0 < m["device_hours"] == pytest.approx(min(m["cpu_seconds"], m["compute_seconds"]) / 3600)
    for key in ("sel-0001",) + (("sel-0003",) if status["sel-0003"] == "width_capped" else ()):
        r = runs[key]
        assert r.data.tags["awnn.hit_max_width"] == "true"
        assert max(json.loads(r.data.tags["awnn.widths"])) <= MAX_WIDTH  # memory bounded by max_width
        assert r.data.metrics["final_width_total"] <= MAX_WIDTH
    # the sweep went on: selection, re-training, counts on the sweep run
    assert status["ass-01"] == "ok"
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking)
    sel = c.get_run(diverged.data.tags["mlflow.parentRunId"])
    assert sel.data.metrics["n_diverged"] == (2 if status["sel-0003"] == "diverged" else 1)
    assert sel.data.metrics["n_width_capped"] == 4 - 1 - sel.data.metrics["n_diverged"]
    assert sel.data.metrics["device_hours"] == pytest.approx(sum(runs[k].data.metrics["device_hours"] for k in runs if k.startswith("sel-")))
    assert status[sel.data.tags["awnn.selected_key"]] != "diverged"
    assert json.loads(sel.data.tags["awnn.selected_config"])["lr"] == 0.01
    assert "diverged" in p.stderr  # the progress line says so


HUGE = 10**15  # a fixed MLP of this width asks for 8e15 bytes: more than any address space, whatever the overcommit policy

FIXED_GRID = f"""\
task: doublemoon
strategy: fixed
epochs: 100
retrain_runs: 1
fixed: {{model: fixed, batch_size: 128, hidden_layers: 1, activation: relu, lr: 0.01}}
grid:
  width: [8, {HUGE}]
"""


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_a_config_too_large_for_memory_fails_in_one_line_per_attempt_and_the_summary_says_why(tmp_path):
    grids, budget = write_inputs(tmp_path, 2, grid=FIXED_GRID, strategy="fixed")
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = run_awnn(sweep_args(tmp_path, grids, budget, tracking, strategy="fixed", extra=["--num-cpus", "2", "--fuse", "1"]),
                 cwd=tmp_path, timeout=280, check=True)
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out[-5000:]  # before: Ray's 68-line traceback at each of the 3 attempts
    attempts = [ln for ln in out.splitlines() if "Trial task failed for trial fixed-sel-0001" in ln]
    assert len(attempts) == 3 and all("out of memory: " in ln and "GiB" in ln for ln in attempts), attempts
    summary = out[out.index("did not end ok"):].splitlines()
    assert "fixed:sel-0001=failed" in summary[0] and "fixed:sel-0001: out of memory:" in summary[1], summary[:3]
    runs = {r.data.tags["awnn.trial_key"]: r for r in trial_runs(tracking)}
    assert runs["sel-0001"].data.tags["awnn.status"] == "failed" and "can't allocate memory" in runs["sel-0001"].data.tags["awnn.error"]
    assert runs["sel-0000"].data.tags["awnn.status"] == runs["ass-01"].data.tags["awnn.status"] == "ok"  # the sweep went on

    one = run_awnn(["train", "--task", "doublemoon", "--model", "fixed", "--epochs", "1", "--set", f"width={HUGE}"], cwd=tmp_path, timeout=120)
    lines = one.stderr.strip().splitlines()
    assert one.returncode == 1 and "Traceback" not in one.stderr, one.stderr[-3000:]
    assert lines[-1].startswith("awnn train: error: out of memory: ") and "a smaller config (width" in lines[-1], lines[-1]
