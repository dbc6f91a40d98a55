"""An arm without a search of its own (fixedplus, issue #18) in the analysis:
its selection cost is the whole search of the arm it depends on (tag
`awnn.depends_on` on its sweep runs), in the cost table, the savings
and the report.  Hand-built comparisons, no Ray or MLflow."""
from __future__ import annotations

import pytest

from tracking import analysis as A
from tracking.document import build_document
from tracking.plots import PLOTS
from tracking.render import render_markdown
from tracking_helpers import comparison_data, trial_row


def _data(with_tag=True):
    rows = [trial_row("fixed", "selection", f"k{i}", 0.01, best_val_acc=0.9) for i in range(4)]
    rows += [trial_row("awnn", "selection", f"k{i}", 0.02, best_val_acc=0.85, widths_at_best=[7]) for i in range(2)]
    rows += [trial_row("fixed", "assessment", f"r{i}", 0.01, test_acc=0.9) for i in range(2)]
    rows += [trial_row("awnn", "assessment", f"r{i}", 0.03, test_acc=0.8, widths_at_best=[7]) for i in range(2)]
    rows += [trial_row("fixedplus", "assessment", f"r{i}", 0.005, test_acc=0.95, model="fixed", width=7.0) for i in range(2)]
    data = comparison_data(rows, strategies=("fixed", "awnn", "fixedplus"))
    sw = data.sweeps
    sw["depends_on"] = [("awnn" if with_tag and s == "fixedplus" else None) for s in sw["strategy"]]
    sw.loc[sw["strategy"] == "fixedplus", "selected_key"] = "from-sel-0000"
    return data


def test_fixedplus_selection_cost_is_the_awnn_search():
    a = A.analyze(_data(), n_boot=200, n_orders=10)
    c = a.costs.set_index(["strategy", "phase"])
    awnn_total = 2 * 0.02 + 2 * 0.03
    assert c.loc[("fixedplus", "selection"), "device_hours"] == pytest.approx(awnn_total)
    assert c.loc[("fixedplus", "selection"), "trials"] == 0 and c.loc[("fixedplus", "selection"), "inherited_from"] == "awnn"
    assert c.loc[("fixedplus", "total"), "device_hours"] == pytest.approx(awnn_total + 2 * 0.005)
    sv = a.savings[a.savings["strategy"] == "fixedplus"].iloc[0]
    assert sv["baseline"] == "fixed" and sv["selection"] == pytest.approx(4 * 0.01 / awnn_total)  # fixed's / its own: dearer here
    assert sv["selection_hours"] == pytest.approx(awnn_total) and sv["total_hours"] == pytest.approx(awnn_total + 0.01)
    assert sv["selection_trials"] == 4  # the awnn arm's 4 trials
    assert sv["selection_lo"] <= sv["selection"] <= sv["selection_hi"]
    st = a.strategies.set_index("strategy")
    assert st.loc["fixedplus", "selected_key"] == "from-sel-0000" and st.loc["fixedplus", "test_acc_mean"] == pytest.approx(0.95)
    md = render_markdown(build_document(a, a.summary()), PLOTS)
    assert "none of its own: the awnn arm's search" in md and "`fixedplus` has no search of its own" in md


def test_without_the_tag_an_arm_pays_only_its_own_runs():
    a = A.analyze(_data(with_tag=False), n_boot=50, n_orders=10)
    c = a.costs.set_index(["strategy", "phase"])
    assert ("fixedplus", "selection") not in c.index
    assert c.loc[("fixedplus", "total"), "device_hours"] == pytest.approx(0.01)


def test_fixedplus_raises_no_false_alarm_and_says_where_its_width_comes_from():
    """Issue #32 item 5: Fixed+ has no selection sweep by design (no "no sweep run" problem, no "1 issues"),
    and its width is taken from the AWNN arm's learned widths, not "chosen by the grid"."""
    data = _data()
    data.sweeps["selected_config"] = [{"model": "awnn" if s == "awnn" else "fixed", "width": 7.0 if s == "fixedplus" else 16.0, "hidden_layers": 1.0}
                                      for s in data.sweeps["strategy"]]
    a = A.analyze(data, n_boot=50, n_orders=10)
    assert not any("fixedplus" in p for p in a.problems), a.problems
    w = a.widths.set_index("strategy")
    assert w.loc["fixedplus", "kind"] == "taken from awnn's learned widths" and w.loc["fixed", "kind"] == "chosen by the grid"
    md = render_markdown(build_document(a, a.summary()), PLOTS)
    assert "no sweep run" not in md and "1 issues" not in md
    assert "| fixedplus | " in md and "| taken from awnn's learned widths | 7 |" in md
    assert "fixedplus 7 = 7 neurons, taken from awnn's learned widths" in md
    # the width of the arm it derives from is named in the summary's width line, and a real problem still counts as 1 issue
    a.problems.append("fixed selection trial k0 failed")
    md = render_markdown(build_document(a, a.summary()), PLOTS)
    assert "**Data quality.** 1 issue, listed under" in md
