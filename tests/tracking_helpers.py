"""Helpers of the tests of tracking/ (tests/tracking/): hand-made trial rows
and comparison data for tracking.analysis, without Ray or MLflow."""
from __future__ import annotations

import math

import pandas as pd

from tracking import analysis as A


def trial_row(strategy, phase, key, device_hours, status="ok", best_val_acc=math.nan, test_acc=math.nan, model=None, width=16.0,
              hidden_layers=1.0, train_seconds=None, epochs_run=2.0, widths_at_best=None, start_time=0, split=None):
    """One row of a comparison's trial table (tracking.analysis.RUN_COLUMNS)."""
    model = model or ("awnn" if strategy == "awnn" else "fixed")
    row = {c: None for c in A.RUN_COLUMNS}
    row.update(run_id=f"{strategy}-{phase}-{key}-{start_time}", strategy=strategy, phase=phase, trial_key=key, status=status,
               run_status="FINISHED", model=model, hidden_layers=hidden_layers, width=width, batch_size=32.0,
               split=split or ("inner" if phase == "selection" else "outer"), seed=0.0, grid_index=0.0, device_hours=device_hours,
               gpu_hours=0.0, compute_seconds=device_hours * 3600, train_seconds=device_hours * 3600 if train_seconds is None else train_seconds,
               epochs_run=epochs_run, best_val_acc=best_val_acc, best_val_loss=0.1, best_epoch=1.0, test_acc=test_acc,
               final_width_total=width * hidden_layers, widths=widths_at_best, widths_at_best=widths_at_best, n_train=math.nan,
               attempts=1.0, retries=0.0, cost_estimated=False, error="", start_time=start_time, end_time=start_time + 1,
               config={"model": model, "width": width, "hidden_layers": hidden_layers})
    return row


def comparison_data(rows, strategies=("fixed", "awnn"), sweeps=None, state="finished"):
    """A ComparisonData of these rows, with one finished sweep per strategy and phase unless `sweeps` is given."""
    runs = pd.DataFrame(rows, columns=A.RUN_COLUMNS)
    info = {"id": "cmp-test", "run_id": "r", "experiment": "awnn-test", "experiment_id": "1", "task": "doublemoon", "budget": "smoke",
            "budget_params": {}, "state": state, "run_status": "FINISHED", "strategies": list(strategies), "command": "compare",
            "cpus_per_trial": 1.0, "gpus_per_trial": 0.0, "wall_seconds": 10.0, "start_time": 0, "end_time": 1}
    if sweeps is None:
        sweeps = []
        for s in strategies:
            for ph in A.PHASES:
                n = sum(1 for r in rows if r["strategy"] == s and r["phase"] == ph)
                if n:
                    sweeps.append({"strategy": s, "phase": ph, "run_id": f"sw-{s}-{ph}", "state": "finished", "trials_declared": float(n),
                                   "configs_declared": float(n), "selected_key": "sel-0" if ph == "selection" else None,
                                   "selected_config": None, "wall_seconds": 1.0})
    return A.ComparisonData("sqlite:///none", info, pd.DataFrame(sweeps), A._run_frame([], list(strategies), info) if not rows else runs)
