"""AWNN's measured overhead compares runs trained the same way.

An AWNN run trains alone in its Ray trial; a fused fixed run (`--fuse`, the
CPU default for the fixed grid) is one slice of a stacked model, and its
`train_seconds` is its share of the group's time: cheaper per config by what
fusion saves.  Until 2026-12-02 `tables.overhead` averaged fused and unfused
fixed runs of the nearest width into one cost, so the report's "AWNN
per-step overhead" measured neither execution, and a `fixed,awnn` comparison
(its fixed grid all fused) reported fusion's saving as AWNN's overhead
without saying so.  Now runs trained alone are preferred within each tier of
the match, and a match made with fused runs only is named as such, in the
table, in the summary (`fused_matches`) and in the report's summary line."""
from __future__ import annotations

import math

import pytest

from tracking import analysis as A
from tracking import report_summary, tables
from tracking_helpers import comparison_data, trial_row


def _run(strategy, key, seconds, width=64.0, group=None, batch=32.0, phase="selection"):
    row = trial_row(strategy, phase, key, seconds / 3600, best_val_acc=0.8, width=width, train_seconds=seconds, epochs_run=1.0,
                    widths_at_best=[int(width)] if strategy == "awnn" else None)
    row["group"], row["batch_size"] = group, batch
    return row


def _awnn(key="sel-a", seconds=3.0, batch=32.0):
    return _run("awnn", key, seconds, width=64.0, batch=batch)


@pytest.mark.parametrize("alone_group", [None, "", math.nan])  # how a run without a group reads back: no tag, an empty one, a gap
def test_an_awnn_run_is_matched_with_fixed_runs_trained_alone_not_with_a_mean_over_both_executions(alone_group):
    rows = [_awnn(seconds=3.0),
            _run("fixed", "sel-1", 1.0, group="g-0000"),  # fused: a share of its group's time
            _run("fixed", "sel-2", 1.0, group="g-0000"),
            _run("tpe", "sel-3", 2.0, group=alone_group)]  # trained alone, as the AWNN run
    table, summary = tables.overhead(comparison_data(rows, strategies=("fixed", "awnn", "tpe")))
    row = table.iloc[0]
    assert (row["fixed_cost"], row["fixed_runs"], row["match"]) == (2.0, 1, "same split, layers and batch size")
    assert row["ratio"] == pytest.approx(1.5)  # 3 / 2; averaged with the fused runs it read 3 / (4/3) = 2.25
    assert (summary["n"], summary["fused_matches"]) == (1, 0)


def test_a_match_with_fused_fixed_runs_only_says_so_in_the_table_the_summary_and_the_report_line():
    rows = [_awnn("sel-a", 3.0), _awnn("sel-b", 2.0),
            _run("fixed", "sel-1", 1.0, group="g-0000"), _run("fixed", "sel-2", 1.0, group="g-0000")]
    data = comparison_data(rows)
    table, summary = tables.overhead(data)
    assert list(table["match"]) == ["same split, layers and batch size" + tables.FUSED_MATCH] * 2
    assert list(table["ratio"]) == pytest.approx([3.0, 2.0])
    assert (summary["n"], summary["fused_matches"]) == (2, 2)
    line = next(i for i in report_summary._result_items(A.analyze(data, n_boot=10, n_orders=5)) if i.startswith("**AWNN overhead.**"))
    assert "; all of them matched with fused fixed runs only" in line and "includes what fusion saves the fixed grid" in line, line


def test_some_matches_fused_the_report_line_counts_them():
    rows = [_awnn("sel-a", 3.0, batch=32.0), _awnn("sel-b", 2.0, batch=128.0),
            _run("fixed", "sel-1", 1.0, group="g-0000", batch=32.0),  # fused only at batch 32
            _run("random", "sel-2", 1.0, batch=128.0)]  # alone at batch 128
    data = comparison_data(rows, strategies=("fixed", "awnn", "random"))
    table, summary = tables.overhead(data)
    assert list(table["match"]) == ["same split, layers and batch size" + tables.FUSED_MATCH, "same split, layers and batch size"]
    assert summary["fused_matches"] == 1
    line = next(i for i in report_summary._result_items(A.analyze(data, n_boot=10, n_orders=5)) if i.startswith("**AWNN overhead.**"))
    assert "; 1 of them matched with fused fixed runs only" in line, line


def test_the_architecture_tier_comes_before_the_execution():
    """Within the closest tier of architecture (split, layers, batch size) runs trained alone are preferred; a fused
    run of the same batch size is a closer match than a run alone of another batch size (per-sample cost depends on
    the batch size at least as much as on fusion), and it is named as fused."""
    rows = [_awnn(seconds=3.0, batch=32.0),
            _run("fixed", "sel-1", 1.5, group="g-0000", batch=32.0),
            _run("tpe", "sel-2", 0.5, batch=128.0)]
    table, summary = tables.overhead(comparison_data(rows, strategies=("fixed", "awnn", "tpe")))
    row = table.iloc[0]
    assert (row["fixed_cost"], row["match"]) == (1.5, "same split, layers and batch size" + tables.FUSED_MATCH)
    assert summary["fused_matches"] == 1


def test_no_fixed_runs_no_fused_matches():
    table, summary = tables.overhead(comparison_data([_awnn()]))
    assert table.iloc[0]["match"] == "no fixed runs" and (summary["n"], summary["fused_matches"]) == (0, 0)
    assert tables.overhead(comparison_data([]))[1]["fused_matches"] == 0
