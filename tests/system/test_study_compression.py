"""`awnn study compression`: the paper's online compression (section 5.3,
Fig. 5).  The schedule's scaling with the budget and the study's grids are
checked without Ray; the study itself on real AWNN sweeps (real Ray, real
MLflow on SQLite under tmp_path) with an 8-epoch budget, where the
compression starts at epoch 2 and its std reaches 0.1 at epoch 4."""
from __future__ import annotations

import math
import statistics

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn, strict_json
from search.budget import BUDGETS, resolve_budget
from search.commands.study_compression import budget_epochs, scaled_schedule, variant_grid, variant_row, verdict, verdict_line
from search.grid import grid_from_dict

# 5000 paper epochs * 0.0016 = 8 epochs; the paper's 1000 -> 2500 of 5000 become 2 -> 4
TINY_BUDGET = "epoch_scale: 0.0016\nmin_epochs: 8\nmax_epochs: 8\nretrain_runs: 2\npatience_scale: 0\ncpu: true\n"
JSON_KEYS = {"claim", "budget", "profiles", "task", "epochs", "schedule", "paper", "rows", "verdicts"}
ROW_KEYS = {"profile", "variant", "comparison", "compress_start_epoch", "compress_end_epoch", "runs", "test_acc_mean", "test_acc_std",
            "width_mean", "width_std", "final_width_mean", "final_width_std", "best_epochs", "curve"}
VERDICT_KEYS = {"width_from", "width_to", "width_change_pct", "test_acc_change_pp", "compressed_width_before_start",
                "compressed_width_last", "width_shrank", "width_halved", "accuracy_kept", "holds"}


def test_schedule_scales_with_the_budgets_epochs(tmp_path):
    # the paper's budget keeps the paper's epochs; the others scale 1000 / 2500 of 5000 like the epochs
    assert [budget_epochs(BUDGETS[b]) for b in ("paper", "quick", "smoke")] == [5000, 30, 2]
    assert scaled_schedule(5000) == (1000, 2500)
    assert scaled_schedule(60) == (12, 30)
    assert scaled_schedule(30) == (6, 15)
    assert scaled_schedule(2) == (1, 1)  # never before epoch 1
    assert scaled_schedule(1000) == (200, 500)
    (tmp_path / "tiny.yaml").write_text(TINY_BUDGET)
    assert budget_epochs(resolve_budget(str(tmp_path / "tiny.yaml"))) == 8
    assert scaled_schedule(8) == (2, 4)


def test_compression_grids_differ_only_in_the_schedule_and_feed_the_trainer_it():
    from awnn.config import TrainConfig
    from awnn.train import Trainer

    (on,) = grid_from_dict(variant_grid("compressed", "authors", 12, 30)).configs()
    (off,) = grid_from_dict(variant_grid("uncompressed", "authors", 12, 30)).configs()
    assert {k for k in on.keys() | off.keys() if on.get(k) != off.get(k)} == {
        "compress_start_epoch", "compress_end_epoch", "compress_rate_mean", "compress_std_start", "compress_std_end"}
    assert off["compress_start_epoch"] == 0
    assert (on["weight_prior"], on["activation"], on["hidden_layers"], on["lr"]) == ("uninformative", "relu6", 1, 0.01)
    trainer = Trainer(TrainConfig.from_dict({**on, "epochs": 60}))
    # uninformative until epoch 12 (not the authors profile's N(0.01, 0.01) for SpiralHard), then N(0.05, 1) -> N(0.05, 0.1) by 30
    assert not trainer.rate_prior(11).informative
    assert (trainer.rate_prior(12).mean, trainer.rate_prior(12).std) == (0.05, 1.0)
    assert trainer.rate_prior(21).std == pytest.approx(1.0 + 0.5 * (0.1 - 1.0))
    assert trainer.rate_prior(30).std == pytest.approx(0.1) and trainer.rate_prior(60).std == pytest.approx(0.1)
    baseline = Trainer(TrainConfig.from_dict({**off, "epochs": 60}))
    assert not any(baseline.rate_prior(e).informative for e in (1, 12, 30, 60))


def _run(key: str, widths: dict[int, float], best_epoch: int, test_acc: float) -> dict:
    return {"key": key, "test_acc": test_acc, "best_epoch": best_epoch, "widths_at_best": [widths[best_epoch]], "width_total": widths,
            "val_acc": {e: 0.9 for e in widths}, "train_prior": {e: 0.0 for e in widths}}


def test_verdict_compares_the_widths_at_the_selected_epoch_and_the_test_accuracy():
    shown = [11, 21, 30, 60]
    flat = {e: 800.0 for e in range(1, 61)}
    falling = {e: 800.0 if e < 12 else 300.0 for e in range(1, 61)}
    off = variant_row("authors", "uncompressed", "a", (12, 30), [_run("ass-01", flat, 60, 0.99), _run("ass-02", flat, 50, 0.97)], shown)
    on = variant_row("authors", "compressed", "b", (12, 30), [_run("ass-01", falling, 60, 0.98), _run("ass-02", falling, 5, 0.98)], shown)
    assert (on["width_mean"], on["final_width_mean"], on["best_epochs"]) == (550.0, 300.0, [60, 5])  # epoch 5 precedes the compression
    v = verdict([off, on], (12, 30))
    assert (v["width_from"], v["width_to"]) == (800.0, 550.0)
    assert v["width_change_pct"] == pytest.approx(-31.25) and v["test_acc_change_pp"] == pytest.approx(0.0)
    assert (v["compressed_width_before_start"], v["compressed_width_last"]) == (800.0, 300.0)
    assert v["width_shrank"] and not v["width_halved"] and v["accuracy_kept"] and v["holds"] is False
    assert verdict_line("authors", v, 12).startswith(
        "authors: compression shrank the width from 800.0 to 550.0 (-31.2%) at a test-accuracy change of +0.00 pp")
    empty = variant_row("authors", "compressed", "c", (12, 30), [], shown)
    assert verdict([off, empty], (12, 30)) == {"no_runs": ["compressed"], "holds": None}


def test_study_compression_rejects_a_bad_budget_before_anything_starts(tmp_path):
    (tmp_path / "bad.yaml").write_text("epoch_scale: -1\n")
    p = run_awnn(["study", "compression", "--budget", "bad.yaml"], cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "awnn study: error: bad.yaml: key 'epoch_scale': expected a number >= 0, found -1"
    assert not (tmp_path / "mlflow.db").exists()


def _expected_prior(rate: float, epoch: int, n_obs: int) -> float:
    """-log N(rate; 0.05, s^2) / n_obs with s annealed 1.0 -> 0.1 over epochs 2 -> 4 (the tiny budget's schedule)."""
    s = 1.0 + min(1.0, (epoch - 2) / 2) * (0.1 - 1.0)
    return ((rate - 0.05) ** 2 / (2 * s * s) + math.log(s) + 0.5 * math.log(2 * math.pi)) / n_obs


@pytest.mark.slow
def test_study_compression_runs_both_variants_and_applies_the_schedule_from_its_start_epoch(tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY_BUDGET)
    p = run_awnn(["study", "compression", "--budget", "tiny.yaml", "--num-cpus", "2"], cwd=tmp_path, check=True)
    out = strict_json(p.stdout.strip().splitlines()[-1])
    assert set(out) == JSON_KEYS and out["claim"] == "compression" and out["epochs"] == 8
    assert (out["schedule"]["start"], out["schedule"]["end"]) == (2, 4)
    rows = {r["variant"]: r for r in out["rows"]}
    assert set(rows) == {"compressed", "uncompressed"} and all(set(r) == ROW_KEYS for r in rows.values())
    assert [c["epoch"] for c in rows["compressed"]["curve"]] == [1, 3, 4, 8]
    verdict = out["verdicts"]["authors"]
    assert set(verdict) == VERDICT_KEYS
    assert verdict["width_from"] == rows["uncompressed"]["width_mean"] and verdict["width_to"] == rows["compressed"]["width_mean"]
    assert verdict["width_change_pct"] == pytest.approx(100 * (verdict["width_to"] / verdict["width_from"] - 1))
    assert "authors: compression " in p.stdout and "pp" in p.stdout

    c = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = c.get_experiment_by_name("awnn-spiralhard")
    trials = [r for r in c.search_runs([exp.experiment_id], max_results=1000) if r.data.tags.get("awnn.kind") == "trial"]
    by_variant = {v: [t for t in trials if t.data.tags["awnn.comparison"] == rows[v]["comparison"]] for v in rows}
    # each variant: its one selection trial and the budget's 2 re-training runs, logged with its schedule
    assert {v: len(ts) for v, ts in by_variant.items()} == {"compressed": 3, "uncompressed": 3}
    assert {t.data.params["compress_start_epoch"] for t in by_variant["compressed"]} == {"2"}
    assert {t.data.params.get("compress_end_epoch") for t in by_variant["compressed"]} == {"4"}
    assert {t.data.params["compress_start_epoch"] for t in by_variant["uncompressed"]} == {"0"}
    assert all("compress_end_epoch" not in t.data.params for t in by_variant["uncompressed"])
    assert {t.data.params["weight_prior"] for t in trials} == {"uninformative"}

    for v, ts in by_variant.items():
        retrain = [t for t in ts if t.data.tags["awnn.phase"] == "assessment"]
        # the report's test accuracy is the re-training runs' in MLflow
        assert rows[v]["test_acc_mean"] == pytest.approx(statistics.fmean(t.data.metrics["test_acc"] for t in retrain))
        for t in retrain:
            prior = {m.step: m.value for m in c.get_metric_history(t.info.run_id, "train_prior")}
            rate = {m.step: m.value for m in c.get_metric_history(t.info.run_id, "rate_l0")}
            assert sorted(prior) == list(range(1, 9))
            if v == "uncompressed":  # uninformative priors throughout: no prior term at any epoch
                assert all(abs(x) < 1e-9 for x in prior.values())
                continue
            n_obs = int(t.data.params["n_obs"])
            assert abs(prior[1]) < 1e-9  # before the start epoch: nothing
            for epoch in range(2, 9):  # from it: N(0.05, s), s annealed 1.0 -> 0.1 by epoch 4 (the mean over the epoch's steps)
                assert prior[epoch] == pytest.approx(_expected_prior(rate[epoch], epoch, n_obs), rel=0.05)
