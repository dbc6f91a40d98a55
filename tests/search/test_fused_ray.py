"""Acceptance of issue #20 on a real local Ray and MLflow: the smoke comparison
with `--fuse 8` against the same comparison without fusion (the session's
`smoke_comparison`).  Every config has its own FINISHED trial run tagged with
its group; the scores are those of the unfused runs to float32 rounding, so
the selection is the same; a group's configs share its time equally; the
report and summary.json state the execution."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from tracking.contract import Tag

pytestmark = pytest.mark.slow

FUSE = 8


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    work = tmp_path_factory.mktemp("fused-compare")
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2", "--fuse", str(FUSE)], cwd=work, check=True)
    (report,) = [d for d in (work / "awnn-results" / "reports").iterdir() if d.is_dir()]
    return {"uri": f"sqlite:///{work / 'mlflow.db'}", "stdout": p.stdout, "report": report}


def _runs(uri):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return c.search_runs([exp.experiment_id], max_results=5000)


def _trials(runs):
    return {(r.data.tags[Tag.ARM], r.data.tags[Tag.PHASE], r.data.tags[Tag.TRIAL_KEY]): r for r in runs if r.data.tags.get(Tag.KIND) == "trial"}


def _selected(runs):
    return {r.data.tags[Tag.ARM]: r.data.tags[Tag.SELECTED_KEY] for r in runs
            if r.data.tags.get(Tag.KIND) == "sweep" and r.data.tags[Tag.PHASE] == "selection"}


def test_every_config_has_its_own_finished_run_with_its_group(fused, smoke_comparison):
    runs, plain = _runs(fused["uri"]), _runs(smoke_comparison["tracking_uri"])
    mine, ref = _trials(runs), _trials(plain)
    assert sorted(mine) == sorted(ref) and len(mine) == len([r for r in runs if r.data.tags.get(Tag.KIND) == "trial"])
    groups = defaultdict(list)
    for (arm, phase, key), r in mine.items():
        assert r.info.status == "FINISHED" and r.data.tags[Tag.STATUS] == ref[(arm, phase, key)].data.tags[Tag.STATUS], key
        group = r.data.tags.get(Tag.GROUP)
        if arm == "fixed" and phase == "selection":
            assert group and group.startswith("fuse-"), key
            groups[group].append(r)
        else:  # AWNN configs and re-training runs run one per trial
            assert group is None, (arm, phase, key)
    assert groups and all(2 <= len(g) <= FUSE for g in groups.values())
    for g in groups.values():  # one depth and batch size per group; one width, or widths up to 32 (padded)
        assert len({(r.data.params["hidden_layers"], r.data.params["batch_size"]) for r in g}) == 1
        widths = {int(r.data.params["width"]) for r in g}
        assert len(widths) == 1 or max(widths) <= 32, widths


def test_same_scores_and_selection_as_without_fusion(fused, smoke_comparison):
    runs, plain = _runs(fused["uri"]), _runs(smoke_comparison["tracking_uri"])
    mine, ref = _trials(runs), _trials(plain)
    for k, r in mine.items():
        if k[0] == "fixed" and k[1] == "selection":
            a, b = r.data.metrics, ref[k].data.metrics
            assert a["best_val_acc"] == pytest.approx(b["best_val_acc"], abs=1e-6), k
            assert a["best_val_loss"] == pytest.approx(b["best_val_loss"], abs=1e-5), k
            assert a["epochs_run"] == b["epochs_run"] and a["best_epoch"] == b["best_epoch"], k
    assert _selected(runs) == _selected(plain)


def test_group_time_is_shared_equally_among_its_configs(fused):
    by_group = defaultdict(list)
    for r in _trials(_runs(fused["uri"])).values():
        if r.data.tags.get(Tag.GROUP):
            by_group[r.data.tags[Tag.GROUP]].append(r.data.metrics)
    for g, members in by_group.items():
        # members trained in the same epochs have the same share of each epoch's time
        by_epochs = defaultdict(set)
        for m in members:
            assert m["train_seconds"] > 0 and m["device_hours"] == pytest.approx(m["compute_seconds"] / 3600.0)
            by_epochs[m["epochs_run"]].add(round(m["train_seconds"], 9))
        assert all(len(v) == 1 for v in by_epochs.values()), (g, dict(by_epochs))


def test_report_states_the_execution(fused, smoke_comparison):
    text = (fused["report"] / "report.md").read_text()
    assert f"fused trials** (`--fuse {FUSE}`)" in text
    summary = json.loads((fused["report"] / "summary.json").read_text())
    e = summary["execution"]
    assert e["flush_denormal"] is True and "flushed to zero on the CPU" in text  # the default (awnn/arith.py)
    n_fixed = len([k for k in _trials(_runs(fused["uri"])) if k[:2] == ("fixed", "selection")])
    assert e["fuse"] == FUSE and e["fused_configs"] == n_fixed and e["by_arm"]["fixed"]["configs"] == n_fixed
    assert 1 <= e["groups"] < n_fixed
    reports = smoke_comparison["dir"] / "awnn-results" / "reports"
    (plain,) = [d for d in reports.iterdir() if d.is_dir()]
    assert "Execution: one config per Ray trial" in (plain / "report.md").read_text()
    assert json.loads((plain / "summary.json").read_text())["execution"]["fused_configs"] == 0
