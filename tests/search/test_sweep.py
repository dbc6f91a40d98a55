"""Sweeps without Ray: the selection rule, budgets that scale the learning-rate
milestones, and an unreachable tracking URI refused before anything starts.
Sweeps on a real local Ray are in tests/search/test_sweep_ray.py."""
from __future__ import annotations

import time

from conftest import run_awnn
from machine import limit
from search.protocol import select_best
from servers import free_port as _free_port


def test_selection_ties_broken_by_loss_then_grid_order():
    o = [
        {"key": "a", "status": "ok", "best_val_acc": 0.9, "best_val_loss": 0.3, "index": 0},
        {"key": "b", "status": "ok", "best_val_acc": 0.9, "best_val_loss": 0.2, "index": 1},
        {"key": "c", "status": "ok", "best_val_acc": 0.9, "best_val_loss": 0.2, "index": 2},
        {"key": "d", "status": "diverged", "best_val_acc": 0.99, "best_val_loss": 0.1, "index": 3},
        {"key": "e", "status": "failed", "index": 4},
    ]
    assert select_best(o)["key"] == "b"
    assert select_best([o[3], o[4]]) is None


def test_sweep_unreachable_tracking_uri_fails_fast(tmp_path):
    port = _free_port()  # nothing listens there
    t0 = time.monotonic()
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--tracking-uri", f"http://127.0.0.1:{port}"], cwd=tmp_path)
    assert p.returncode == 2
    assert f"--tracking-uri http://127.0.0.1:{port}: cannot reach the MLflow server" in p.stderr
    assert time.monotonic() - t0 < limit(30)
    assert not (tmp_path / "awnn-results").exists()


def test_selection_on_loss_for_grids_that_select_on_loss():
    o = [
        {"key": "a", "status": "ok", "best_val_acc": 0.5, "best_val_loss": 1.2, "index": 0, "config": {"select_metric": "loss"}},
        {"key": "b", "status": "ok", "best_val_acc": 0.6, "best_val_loss": 1.5, "index": 1, "config": {"select_metric": "loss"}},
    ]
    assert select_best(o)["key"] == "a"


def test_budget_scales_lr_milestones_with_epochs():
    from search.budget import BUDGETS
    from search.grid import find_grid
    from search.protocol import assessment_specs, selection_specs

    g = find_grid("cifar10", "fixed")
    assert g.fixed["lr_milestones"] == "50,100,150" and g.epochs == 200
    quick = BUDGETS["quick"]
    specs = selection_specs(g, quick)
    assert {s.config["epochs"] for s in specs} == {quick.epochs(g)} == {20}
    assert {s.config["lr_milestones"] for s in specs} == {"5,10,15"}
    assert {s.config["lr_milestones"] for s in assessment_specs(specs[0].config, g, quick)} == {"5,10,15"}
    assert {s.config["lr_milestones"] for s in selection_specs(g, BUDGETS["paper"])} == {"50,100,150"}


def test_remove_driver_staging_takes_only_the_experiments_folder(tmp_path):
    """search/tune.py: remove_driver_staging removes <session>/artifacts/*/<experiment>
    (a name with glob characters matched literally), and the time folder only
    when nothing else is in it; other experiments and Ray's logs stay."""
    from search.tune import remove_driver_staging

    session = tmp_path / "session_x"
    mine = "spiral[1]-2026"
    (session / "logs").mkdir(parents=True)
    (session / "logs" / "raylet.out").write_text("log")
    (session / "artifacts" / "t1" / mine / "driver_artifacts").mkdir(parents=True)
    (session / "artifacts" / "t1" / mine / "driver_artifacts" / "experiment_state.json").write_text("{}")
    (session / "artifacts" / "t2" / mine).mkdir(parents=True)
    (session / "artifacts" / "t2" / "other").mkdir(parents=True)
    (session / "artifacts" / "t3" / "spiral1-2026").mkdir(parents=True)  # what the unescaped pattern would match
    assert remove_driver_staging(str(session), mine) == 2
    left = sorted(str(p.relative_to(session)) for p in session.rglob("*"))
    assert left == ["artifacts", "artifacts/t2", "artifacts/t2/other", "artifacts/t3", "artifacts/t3/spiral1-2026", "logs", "logs/raylet.out"]
    assert remove_driver_staging(None, mine) == 0
    assert remove_driver_staging(str(tmp_path / "gone"), mine) == 0
