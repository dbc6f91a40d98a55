"""The warning for an arm whose selected config won a tie of inner
validation accuracy on the validation loss (tracking/caveats.py
`selection_ties`): on SpiralHard at the standard budget three AWNN configs
reached 100%, and another CPU picked another of them, at twice the width
(docs/results.md, "The standard verdict, a tie away")."""
from __future__ import annotations

import math

from tracking.caveats import caveats, selection_ties


def o(key, acc, loss, status="ok", metric=None):
    return {"key": key, "status": status, "best_val_acc": acc, "best_val_loss": loss, "select_metric": metric}


def test_a_tie_decided_by_the_loss_is_one_line_naming_the_runner_up():
    (line,) = selection_ties([("awnn", "sel-0012", [o("sel-0012", 1.0, 0.00576), o("sel-0014", 1.0, 0.0126), o("sel-0016", 1.0, 0.00718),
                                                   o("sel-0006", 0.81, 0.43)])])
    assert line.startswith("awnn: its selected config sel-0012 won a tie: 3 configs reached 100.00% inner validation accuracy")
    assert "(0.00576 against 0.00718 for sel-0016, the next)" in line


def test_no_tie_no_line_and_configs_that_cannot_be_selected_do_not_tie():
    assert selection_ties([("fixed", "sel-0001", [o("sel-0001", 0.95, 0.1), o("sel-0002", 0.94, 0.05)])]) == []
    # a failed or ASHA-stopped trial with the same score is no rival; nor is a NaN score
    assert selection_ties([("asha", "sel-0001", [o("sel-0001", 0.95, 0.1), o("sel-0002", 0.95, 0.05, status="stopped"),
                                                 o("sel-0003", 0.95, 0.01, status="failed"), o("sel-0004", math.nan, 0.0)])]) == []
    # width_capped is selectable, so it ties
    assert len(selection_ties([("awnn", "sel-0001", [o("sel-0001", 0.95, 0.1), o("sel-0002", 0.95, 0.2, status="width_capped")])])) == 1


def test_arms_that_select_on_loss_or_selected_nothing_are_skipped():
    assert selection_ties([("fixed", "sel-0001", [o("sel-0001", 0.5, 0.1, metric="loss"), o("sel-0002", 0.5, 0.2, metric="loss")])]) == []
    assert selection_ties([("fixedplus", None, []), ("fixed", "sel-0009", [o("sel-0001", 0.5, 0.1)])]) == []


def test_under_cross_validation_only_the_selected_keys_fold_counts():
    outcomes = [o("f0-sel-0001", 0.9, 0.1), o("f1-sel-0001", 0.9, 0.2), o("f0-sel-0002", 0.8, 0.3)]
    assert selection_ties([("fixed", "f0-sel-0001", outcomes)]) == []
    (line,) = selection_ties([("fixed", "f0-sel-0001", [*outcomes, o("f0-sel-0003", 0.9, 0.15)])])
    assert "2 configs reached 90.00%" in line and "f0-sel-0003" in line


def test_a_missing_loss_still_names_the_runner_up_and_caveats_carries_the_lines():
    (line,) = selection_ties([("awnn", "sel-0001", [o("sel-0001", 1.0, None), o("sel-0002", 1.0, None)])])
    assert "(the next: sel-0002)" in line
    lines = caveats("standard", [0.9, 0.8], selections=[("awnn", "sel-0001", [o("sel-0001", 1.0, 0.1), o("sel-0002", 1.0, 0.2)])])
    assert len(lines) == 1 and lines[0].startswith("awnn: its selected config sel-0001 won a tie")


def test_an_arm_that_learns_its_widths_is_one_draw_in_a_comparison_with_others():
    from tracking.caveats import one_draw_caveat

    assert one_draw_caveat([], ["fixed", "tpe"]) is None
    assert one_draw_caveat(["awnn"], ["awnn"]) is None  # nothing to compare its cost with
    line = one_draw_caveat(["awnn"], ["fixed", "awnn"])
    assert line.startswith("awnn learns its widths: ") and "one draw" in line and "`--train-seed S` gives another draw" in line
    assert one_draw_caveat(["awnn", "awnn-asha"], ["fixed", "awnn", "awnn-asha"]).startswith("awnn, awnn-asha learn their widths: ")
    assert line in caveats("standard", [0.9, 0.8], learned=(["awnn"], ["fixed", "awnn"]))
    assert not any("one draw" in x for x in caveats("smoke", [0.9, 0.8], learned=(["awnn"], ["fixed", "awnn"])))
    assert caveats("standard", [0.9, 0.8]) == []  # not checked without the arms


def test_the_report_of_a_stored_comparison_warns_that_its_adaptive_arm_is_one_draw(tmp_path):
    """The golden smoke comparison's store (fixed and awnn), read as if its budget were quick: the analysis finds
    the arm that learns its widths from the runs' model and warns; at its own smoke budget it does not."""
    from golden_report import golden_store
    from tracking.analysis import analyze
    from tracking.reader import load_comparison

    data = load_comparison(golden_store(tmp_path))
    assert data.adaptive_arms() == ["awnn"] and data.strategies == ["fixed", "awnn"]
    assert not any("one draw" in w for w in analyze(data, n_boot=50, n_orders=20).warnings)
    data.comparison["budget"] = "quick"
    (line,) = [w for w in analyze(data, n_boot=50, n_orders=20).warnings if "one draw" in w]
    assert line.startswith("awnn learns its widths: ")
