"""`awnn compare --train-seed S` on a real local Ray with a real MLflow: every
trial of every phase and strategy (a grid, and TPE, whose configs are made at
suggest time) trains with its draw's seed (1000 S, re-training run r 1000 S + r), the trainer really used it, and the
comparison run, summary.json and the report say which."""
from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn

pytestmark = pytest.mark.slow

SEED = 9


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    work = tmp_path_factory.mktemp("seeded")
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "awnn,tpe", "--tpe-trials", "2",
                  "--train-seed", str(SEED), "--num-cpus", "2", "--tpe-window", "1"], cwd=work, check=True)
    c = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return {"dir": work, "stdout": p.stdout, "runs": c.search_runs([exp.experiment_id], max_results=1000)}


def test_every_trial_trains_with_the_draws_seed_and_each_retraining_with_that_plus_r(seeded):
    trials = [r for r in seeded["runs"] if r.data.tags.get("awnn.kind") == "trial"]
    phases = {}
    for t in trials:
        key = (t.data.tags["awnn.strategy"], t.data.tags["awnn.phase"])
        phases.setdefault(key, []).append((t.data.tags["awnn.trial_key"], int(t.data.params["seed"]), int(t.data.params["data_seed"])))
    assert set(phases) == {("awnn", "selection"), ("awnn", "assessment"), ("tpe", "selection"), ("tpe", "assessment")}
    for (strategy, phase), rows in phases.items():
        assert {d for _, _, d in rows} == {0}, (strategy, phase)  # the same data split
        if phase == "selection":
            assert {s for _, s, _ in rows} == {1000 * SEED}, (strategy, rows)
        else:
            assert sorted((k, s) for k, s, _ in rows) == [("ass-01", 1000 * SEED + 1), ("ass-02", 1000 * SEED + 2)], (strategy, rows)


def test_the_seed_reached_the_trainer(seeded, smoke_comparison):
    """The same AWNN config (DoubleMoon, 2 epochs) trained with seed 9 and, in
    the session's default comparison, with seed 0: another initialisation,
    so another training loss; the same data, so the same number of examples."""
    def first_awnn(runs):
        (t,) = [r for r in runs if r.data.tags.get("awnn.kind") == "trial" and r.data.tags["awnn.strategy"] == "awnn"
                and r.data.tags["awnn.trial_key"] == "sel-0000"]
        return t

    default_client = MlflowClient(smoke_comparison["tracking_uri"])
    exp = default_client.get_experiment_by_name("awnn-doublemoon")
    plain = first_awnn(default_client.search_runs([exp.experiment_id], max_results=1000))
    mine = first_awnn(seeded["runs"])
    assert plain.data.params["seed"] == "0"
    same = lambda run: {k: v for k, v in run.data.params.items() if k not in ("seed", "data_root")}  # noqa: E731  (data_root: each its folder)
    assert same(mine) == same(plain)
    assert mine.data.metrics["n_train"] == plain.data.metrics["n_train"]
    assert mine.data.metrics["train_nll"] != plain.data.metrics["train_nll"]


def test_the_comparison_run_the_summary_and_the_report_name_the_seed(seeded):
    (cmp,) = [r for r in seeded["runs"] if r.data.tags.get("awnn.kind") == "comparison"]
    assert json.loads(cmp.data.params["budget"])["train_seed"] == SEED
    (folder,) = (seeded["dir"] / "awnn-results" / "reports").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["protocol"]["train_seed"] == SEED
    assert f"Training draw `--train-seed {SEED}` (selection seed {1000 * SEED}; assessment seeds {1000 * SEED + 1}, {1000 * SEED + 2})" \
        in (folder / "report.md").read_text()


def test_a_default_comparison_says_seed_0_and_no_seed_line(smoke_comparison):
    (folder,) = (smoke_comparison["dir"] / "awnn-results" / "reports").iterdir()
    assert json.loads((folder / "summary.json").read_text())["protocol"]["train_seed"] == 0
    assert "--train-seed" not in (folder / "report.md").read_text()


def test_tpe_window_flag_sets_the_studys_ask_window(seeded):
    """`--tpe-window 1` on two slots: TPE's sweep records it (search/tpe.py, "The ask window")."""
    sweep = next(r for r in seeded["runs"] if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags["awnn.arm"] == "tpe"
                 and r.data.tags["awnn.phase"] == "selection")
    assert sweep.data.params["tpe_ask_window"] == "1"
