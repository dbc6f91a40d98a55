"""Sweeps on a real local Ray with a real MLflow: the tracking contract.  The
selection rule, budgets and bad tracking URIs, without Ray, are in
tests/search/test_sweep.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from awnn.config import TrainConfig
from conftest import run_awnn
from search.protocol import select_best
from servers import free_port as _free_port

pytestmark = pytest.mark.slow


def _runs(uri: str, task: str = "doublemoon"):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(f"awnn-{task}")
    return c, c.search_runs([exp.experiment_id], max_results=10000)


def test_sweep_smoke_one_child_run_per_config_under_right_parent(smoke_comparison):
    c, runs = _runs(smoke_comparison["tracking_uri"])
    roots = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    assert len(roots) == 1
    sweeps = {(r.data.tags["awnn.strategy"], r.data.tags["awnn.phase"]): r for r in runs if r.data.tags.get("awnn.kind") == "sweep"}
    assert set(sweeps) == {("fixed", "selection"), ("fixed", "assessment"), ("awnn", "selection"), ("awnn", "assessment")}
    for s in sweeps.values():
        assert s.data.tags["mlflow.parentRunId"] == roots[0].info.run_id
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    expected = {("fixed", "selection"): 30, ("awnn", "selection"): 6, ("fixed", "assessment"): 2, ("awnn", "assessment"): 2}
    for (strategy, phase), n in expected.items():
        mine = [t for t in trials if t.data.tags["awnn.strategy"] == strategy and t.data.tags["awnn.phase"] == phase]
        assert len(mine) == n
        assert {t.data.tags["mlflow.parentRunId"] for t in mine} == {sweeps[(strategy, phase)].info.run_id}
        assert len({t.data.tags["awnn.trial_key"] for t in mine}) == n  # one run per config, none twice
    grid_indices = sorted(int(t.data.params["grid_index"]) for t in trials if t.data.tags["awnn.strategy"] == "fixed" and t.data.tags["awnn.phase"] == "selection")
    assert grid_indices == list(range(30))


def test_sweep_reuses_one_actor_per_slot_across_phases(smoke_comparison):
    """Four phases (two strategies x selection, re-training) on a 2-CPU local
    Ray: every trial ran in one of at most two worker processes - no actor
    was stopped at a phase's tail and started again (search/tune.py,
    _ray_speedups.keep_idle_actors; without it each phase starts new ones),
    and those were warm before the first trial (init_ray).

    Not "exactly two": the smoke trials last well under a second, and on a
    loaded machine (a fresh-clone CI run: two test workers on two cores) the
    first actor ran every trial (pid 17404 for all 46): a trial there is shorter
    than the start of an actor, and Tune hands a pending trial to an idle actor
    it has rather than wait for another to start."""
    c, runs = _runs(smoke_comparison["tracking_uri"])
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    pids = {(t.data.tags["awnn.node_id"], t.data.tags["awnn.pid"]) for t in trials}
    assert 1 <= len(pids) <= 2, sorted(pids)
    assert len({node for node, _ in pids}) == 1, sorted(pids)  # one local node
    # ... and those are among the two workers the local Ray started with the node
    # and warmed (torch & co. imported) while the driver set up MLflow (init_ray)
    (cmp,) = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    warm = set(cmp.data.tags["awnn.warm_pids"].split(","))
    assert len(warm) == 2 and {pid for _, pid in pids} <= warm, (sorted(pids), warm)
    phases = {(t.data.tags["awnn.strategy"], t.data.tags["awnn.phase"]) for t in trials}
    assert len(phases) == 4


def test_sweep_trial_runs_follow_tracking_contract(smoke_comparison):
    c, runs = _runs(smoke_comparison["tracking_uri"])
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    for t in trials:
        # the config keys that apply to the run's model and domain (issue #17), plus the trial params
        keys = set(TrainConfig.from_dict(json.loads(t.data.tags["awnn.config"])).applicable("tabular"))
        assert set(t.data.params) == keys | {"trial_key", "phase", "grid_index"}, keys ^ set(t.data.params)
        assert t.data.tags["awnn.status"] == "ok"
        assert t.info.status == "FINISHED"
        m = t.data.metrics
        for name in ("best_val_acc", "train_seconds", "device_hours", "gpu_hours", "compute_seconds", "epochs_run", "val_acc", "train_loss", "width_total", "width_l0"):
            assert name in m, (name, sorted(m))
        assert m["gpu_hours"] == 0.0
        assert m["train_seconds"] > 0
        # 1 CPU per trial on CPU: device-hours are its CPU seconds, capped at its compute (wall) seconds, / 3600
        assert m["wall_device_hours"] == pytest.approx(m["compute_seconds"] / 3600)
        assert 0 < m["device_hours"] == pytest.approx(min(m["cpu_seconds"], m["compute_seconds"]) / 3600)
        assert m["epochs_run"] == 2
        if t.data.tags["awnn.phase"] == "assessment":
            assert 0.0 <= m["test_acc"] <= 1.0
            assert t.data.params["split"] == "outer"
        else:
            assert "test_acc" not in m
            assert t.data.params["split"] == "inner"
        if t.data.tags["awnn.strategy"] == "awnn":
            assert "rate_l0" in m and json.loads(t.data.tags["awnn.widths"])[0] == m["width_l0"]
    one = trials[0]
    hist = c.get_metric_history(one.info.run_id, "val_acc")
    assert sorted(h.step for h in hist) == [1, 2]  # one value per epoch, step = epoch


def test_sweep_selection_picks_best_inner_validation_config(smoke_comparison):
    c, runs = _runs(smoke_comparison["tracking_uri"])
    for strategy in ("fixed", "awnn"):
        sel = [r for r in runs if r.data.tags.get("awnn.kind") == "trial" and r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == "selection"]
        outcomes = [{"key": r.data.tags["awnn.trial_key"], "status": r.data.tags["awnn.status"], "best_val_acc": r.data.metrics["best_val_acc"],
                     "best_val_loss": r.data.metrics["best_val_loss"], "index": int(r.data.params["grid_index"])} for r in sel]
        best_acc = max(o["best_val_acc"] for o in outcomes)
        chosen = select_best(outcomes)
        assert chosen["best_val_acc"] == best_acc
        sweep = next(r for r in runs if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == "selection")
        assert sweep.data.tags["awnn.selected_key"] == chosen["key"]
        ass = [r for r in runs if r.data.tags.get("awnn.kind") == "trial" and r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == "assessment"]
        selected_cfg = json.loads(sweep.data.tags["awnn.selected_config"])
        for r in ass:  # re-training runs use the selected config with new seeds
            for k in ("width", "hidden_layers", "activation", "lr", "batch_size"):
                if k in selected_cfg:
                    assert r.data.params[k] == str(selected_cfg[k])
        assert sorted(int(r.data.params["seed"]) for r in ass) == [1, 2]


def test_sweep_phase_totals_and_summary_table(smoke_comparison):
    c, runs = _runs(smoke_comparison["tracking_uri"])
    for sweep in (r for r in runs if r.data.tags.get("awnn.kind") == "sweep"):
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == sweep.info.run_id]
        assert sweep.data.metrics["n_trials"] == len(kids)
        assert sweep.data.metrics["device_hours"] == pytest.approx(sum(k.data.metrics["device_hours"] for k in kids))
        assert sweep.data.tags["awnn.state"] == "finished"
    out = smoke_comparison["stdout"]
    assert "arm" in out and "fixed" in out and "awnn" in out and "+-" in out
    # MLflow's own INFO lines on the new SQLite store's tables are not in the command's output (tracking/contract.py client)
    assert "mlflow.store.db.utils" not in out + smoke_comparison["stderr"], smoke_comparison["stderr"][-2000:]


@pytest.mark.long  # in CI, tests/system/test_fault_tracking.py runs sweeps against a real server (and through its outage)
def test_sweep_logs_to_real_mlflow_server(tmp_path):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        import requests

        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if requests.get(uri + "/health", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not start within 90 s")
        run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--num-cpus", "2", "--tracking-uri", uri], cwd=tmp_path, check=True)
        assert not (tmp_path / "mlflow.db").exists()  # nothing went to the default SQLite file
        c, runs = _runs(uri)
        trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
        assert len(trials) == 6 + 2
        assert all(t.data.tags["awnn.status"] == "ok" for t in trials)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def test_sweep_trial_params_carry_the_awnn_profile_and_its_choices(smoke_comparison):
    """New comparisons run the `authors` profile; every resolved choice is a
    param of each AWNN trial, and the profile a tag."""
    from awnn.config import PROFILE_KEYS, profile_values

    _, runs = _runs(smoke_comparison["tracking_uri"])
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial" and r.data.params.get("model") == "awnn"]
    assert trials
    expected = profile_values("authors", "doublemoon")
    for t in trials:
        assert t.data.params["awnn_profile"] == "authors"
        assert t.data.tags["awnn.profile"] == "authors"
        for key in PROFILE_KEYS:
            assert t.data.params[key] == str(expected[key]), key


def test_ray_storage_keeps_checkpoints_and_models_and_no_empty_trial_folders(smoke_comparison):
    """Issue #17: Tune's own result files are off (MLflow is the record, --resume
    reads it), so what the storage keeps per trial is a checkpoint: each
    re-training run's kept model; the folders Tune left empty are removed."""
    (folder,) = [d for d in (smoke_comparison["dir"] / "awnn-results").iterdir() if d.is_dir() and d.name != "reports"]
    trials = [d for d in folder.iterdir() if d.is_dir()]
    assert trials and all(any(d.iterdir()) for d in trials), [d.name for d in trials if not any(d.iterdir())]
    kept = sorted(d.name for d in trials if list(d.glob("checkpoint_*/model.pt")))
    assert kept == sorted(d.name for d in trials if "-ass-" in d.name) == ["awnn-ass-01", "awnn-ass-02", "fixed-ass-01", "fixed-ass-02"]


def test_no_staging_copy_of_the_experiment_is_left_in_rays_session_folder(smoke_comparison):
    """Tune stages its experiment state in the Ray session folder
    (<temp>/ray/session_*/artifacts/<time>/<experiment>) and syncs it to the
    storage path; Ray never deletes session folders, so each comparison left
    its copy behind.  After a comparison that finished, the storage has it and
    the session folder does not."""
    import tempfile
    from pathlib import Path

    (folder,) = [d for d in (smoke_comparison["dir"] / "awnn-results").iterdir() if d.is_dir() and d.name != "reports"]
    assert list(folder.glob("experiment_state-*.json")), sorted(p.name for p in folder.iterdir())
    ray_temp = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"
    sessions = list(ray_temp.glob("session_*"))
    assert sessions, f"no Ray session folder under {ray_temp}"
    left = list(ray_temp.glob(f"session_*/artifacts/*/{folder.name}"))
    assert left == []
