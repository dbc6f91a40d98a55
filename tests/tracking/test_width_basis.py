"""Fixed and AWNN widths on one basis (issue #16): the layers the trainer
records - for GIN the MLP before the convolutions and one per convolution -
summed alike for both arms, in the report's width table and in the
terminal summary; stores without recorded fixed widths fall back to the
config's width per hidden layer."""
from __future__ import annotations

from search.grid import find_grid
from search.record import PhaseResult, StrategyResult
from tracking import tables
from tracking_helpers import comparison_data, trial_row


def gin_data(fixed_widths):
    rows = [trial_row("fixed", "selection", "sel-0", 0.01, best_val_acc=0.8, width=64.0),
            trial_row("awnn", "selection", "sel-0", 0.01, best_val_acc=0.8, widths_at_best=[30, 40, 50, 60, 70])]
    for r in (1, 2):
        fixed = trial_row("fixed", "assessment", f"ass-0{r}", 0.01, test_acc=0.7, width=64.0)
        fixed["widths"] = fixed_widths
        rows += [fixed, trial_row("awnn", "assessment", f"ass-0{r}", 0.01, test_acc=0.7, widths_at_best=[30, 40, 50, 60, 70 + r])]
    data = comparison_data(rows)
    cfg = {"fixed": {"model": "fixed", "width": 64, "hidden_layers": 1, "conv_layers": 4},
           "awnn": {"model": "awnn", "hidden_layers": 1, "conv_layers": 4}}
    data.sweeps.loc[data.sweeps["phase"] == "selection", "selected_key"] = "sel-0"
    data.sweeps["selected_config"] = [cfg[s] if ph == "selection" else None for s, ph in zip(data.sweeps["strategy"], data.sweeps["phase"])]
    return data


def test_report_sums_fixed_and_awnn_widths_over_the_same_layers():
    w = tables.width_table(gin_data([64, 64, 64, 64, 64])).set_index("strategy")
    assert (w.loc["fixed", "layers"], w.loc["fixed", "total_mean"], w.loc["fixed", "per_layer"]) == (5, 320.0, "64, 64, 64, 64, 64")
    assert (w.loc["awnn", "layers"], w.loc["awnn", "total_mean"]) == (5, 251.5)
    old = tables.width_table(gin_data(None)).set_index("strategy")  # a store without recorded fixed widths
    assert (old.loc["fixed", "layers"], old.loc["fixed", "total_mean"]) == (1, 64.0)


def test_terminal_summary_counts_the_recorded_layers():
    grid = find_grid("nci1", "fixed")
    ass = PhaseResult("fixed", "assessment", outcomes=[{"status": "ok", "widths": [64] * 5}])
    r = StrategyResult("fixed", grid, PhaseResult("fixed", "selection"), assessment=ass, selected={"config": {"model": "fixed", "width": 64, "hidden_layers": 1}})
    assert r.widths() == "64 x 5"
    r.assessment = PhaseResult("fixed", "assessment")
    assert r.widths() == "64 x 1"


def test_gin_overhead_pairs_runs_of_the_same_depth_and_pooling_per_recorded_layer():
    """AWNN's overhead on GIN is measured against fixed runs with the same
    number of convolutions and the same pooling, per layer of the same basis."""
    def gin(strategy, key, conv, pooling, width, seconds, widths):
        row = trial_row(strategy, "selection", key, seconds / 3600, best_val_acc=0.8, width=width, train_seconds=seconds, epochs_run=1.0,
                        widths_at_best=widths)
        row["config"] = {**row["config"], "conv_layers": conv, "pooling": pooling}
        row["final_width_total"] = float(sum(widths))
        return row

    rows = [gin("awnn", "sel-0", 4, "mean", 16.0, 3.0, [60, 70, 80, 90, 100]),
            gin("fixed", "sel-1", 1, "sum", 64.0, 1.0, [64, 64]),  # shallow and cheap: must not be the match
            gin("fixed", "sel-2", 4, "mean", 64.0, 2.0, [64] * 5),
            gin("fixed", "sel-3", 4, "mean", 512.0, 9.0, [512] * 5)]
    table, _ = tables.overhead(comparison_data(rows))
    row = table.set_index("trial_key").loc["sel-0"]
    assert row["mean_width"] == 80.0  # 400 over the 5 recorded MLPs
    assert (row["fixed_width"], row["fixed_runs"], row["ratio"]) == (64.0, 1, 1.5)
    assert row["match"] == "same split, layers, batch size and conv_layers, pooling"
