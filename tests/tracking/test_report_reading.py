"""What a reader needs before the numbers (issue #17): warnings, the budget,
accuracy axes that stop at 100%, the accuracy-versus-cost plot, and links
to the MLflow runs.  Hand-built comparisons, no Ray or MLflow."""
from __future__ import annotations

import math

import pytest

from tracking import analysis as A
from tracking.caveats import SATURATED, caveats
from tracking.document import build_document
from tracking.header import setup_section
from tracking.links import comparison_links, run_url, server_base
from tracking.plots import PLOTS, _clip_percent, plot_accuracy_cost
from tracking.render import render_html, render_markdown
from tracking_helpers import comparison_data, trial_row


def _rows(acc_fixed=0.9, acc_awnn=0.8):
    rows = [trial_row("fixed", "selection", f"k{i}", 0.01, best_val_acc=0.9) for i in range(3)]
    rows += [trial_row("awnn", "selection", f"k{i}", 0.01, best_val_acc=0.85, widths_at_best=[7]) for i in range(2)]
    rows += [trial_row("fixed", "assessment", f"r{i}", 0.02, test_acc=acc_fixed + 0.01 * i) for i in range(2)]
    rows += [trial_row("awnn", "assessment", f"r{i}", 0.02, test_acc=acc_awnn + 0.01 * i, widths_at_best=[7]) for i in range(2)]
    return rows


def _texts(doc) -> str:
    return "\n".join(str(b[1]) if b[0] != "ul" else "\n".join(b[1]) for b in doc if b[0] in ("p", "ul", "h2"))


@pytest.mark.parametrize("budget,means,expected", [
    ("smoke", [0.5, 0.6], ["smoke"]),
    ("quick", [1.0, SATURATED], ["saturated"]),
    ("quick", [1.0, 0.99], []),
    ("quick", [1.0], []),  # one arm: nothing to rank
    ("quick", [1.0, math.nan, None, 1.0], ["saturated"]),  # arms without a test accuracy are left out, not counted as low
    ("paper", [], []),
])
def test_caveats_name_a_smoke_budget_and_a_saturated_task(budget, means, expected):
    lines = caveats(budget, means)
    assert len(lines) == len(expected) and all(word in line for word, line in zip(expected, lines)), lines


def test_report_summary_opens_with_the_warnings_and_the_header_spells_out_the_budget():
    data = comparison_data(_rows(1.0, 1.0))
    data.comparison["budget_params"] = {"name": "quick", "epoch_scale": 0.012, "min_epochs": 20, "max_epochs": 60, "retrain_runs": 3}
    for i in range(len(data.runs)):
        data.runs.at[i, "config"] = {**data.runs.at[i, "config"], "epochs": 60 if data.runs.at[i, "strategy"] == "fixed" else 40}
    data.sweeps["retrain_runs"] = 3.0
    a = A.analyze(data, n_boot=50, n_orders=20)
    doc = build_document(a, a.summary())
    summary = next(b for i, b in enumerate(doc) if b[0] == "ul" and doc[i - 1] == ("h2", "Summary"))
    assert summary[1][0].startswith("**Warning:** the smoke budget") and "saturated" in summary[1][1]
    head = _texts(setup_section(a))
    assert "epochs per trial = the grid's epochs x 0.012, clipped to [20, 60]; R = 3 re-training runs" in head
    assert "fixed 60 epochs a trial, R = 3; awnn 40 epochs a trial, R = 3" in head
    assert a.summary()["warnings"] == a.warnings and len(a.warnings) == 2


def test_the_report_leads_with_the_verdict_and_the_accuracy_cost_plot_and_the_setup_follows():
    """Issue #32 items 3 and 5: the verdict and the accuracy-against-cost plot first, the setup after the summary;
    a smoke budget reads "2 epochs per trial"; one other comparison and one issue are singular."""
    data = comparison_data(_rows(0.9, 0.895))
    data.comparison["budget_params"] = {"name": "smoke", "epoch_scale": 0.0, "min_epochs": 2, "max_epochs": 2, "retrain_runs": 2}
    data.other_comparisons = [{"id": "doublemoon-older", "state": "finished", "start_time": 0}]
    a = A.analyze(data, n_boot=50, n_orders=20)
    a.problems.append("fixed selection trial k0 failed")
    md = render_markdown(build_document(a, a.summary()), PLOTS)
    blocks = md.split("\n\n")
    assert blocks[1] == a.summary()["verdict"]["text"] and blocks[1].startswith("**Verdict:** `awnn` is the cheapest arm")
    assert blocks[2] == f"![Test accuracy of each arm's selected config against its total device-hours]({PLOTS['accuracy_cost']})"
    assert md.index("## Summary") < md.index("## Problems") < md.index("## Setup") < md.index("## What each strategy spent")
    assert md.count("(accuracy_cost.png)") == 1
    setup = md.split("## Setup", 1)[1].split("\n## ", 1)[0]
    assert "Budget `smoke`: 2 epochs per trial; R = 2 re-training runs." in setup and "x 0, clipped" not in md
    assert "The store holds 1 other comparison; pass `--comparison ID` to report on it (`doublemoon-older`)." in setup
    assert "**Data quality.** 1 issue, listed under" in md and "1 issues" not in md


def test_report_without_cause_for_warning_has_none():
    """Fixed against AWNN at a quick budget: the one warning is that AWNN's cost is one draw of its learned widths
    (tracking/caveats.py one_draw_caveat); with no arm that learns its widths, there is none."""
    data = comparison_data(_rows(0.9, 0.8))
    data.comparison["budget"] = "quick"
    a = A.analyze(data, n_boot=50, n_orders=20)
    assert data.adaptive_arms() == ["awnn"]
    (line,) = a.warnings
    assert line.startswith("awnn learns its widths: ") and f"**Warning:** {line}" in _texts(build_document(a, a.summary()))
    data.runs["model"] = "fixed"  # (as if both arms searched fixed widths)
    a = A.analyze(data, n_boot=50, n_orders=20)
    assert a.warnings == [] and "**Warning:**" not in _texts(build_document(a, a.summary()))


def test_accuracy_axes_stop_at_100_percent():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    _clip_percent(ax, [100.0, 99.0, math.nan])
    assert ax.get_ylim()[1] == 100.0 and 90 <= ax.get_ylim()[0] < 99
    _clip_percent(ax, [3.0])
    assert ax.get_ylim() == (0.0, 100.0)
    plt.close(fig)


def test_accuracy_cost_plot_is_written_with_and_without_scored_arms(tmp_path):
    for rows in (_rows(), [r for r in _rows() if r["phase"] == "selection"]):
        a = A.analyze(comparison_data(rows), n_boot=20, n_orders=10)
        out = tmp_path / f"{len(rows)}.png"
        plot_accuracy_cost(a, out)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert PLOTS["accuracy_cost"] == "accuracy_cost.png"


@pytest.mark.parametrize("uri,base", [
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("https://user:secret@mlflow.example.org/", "https://mlflow.example.org"),
    ("sqlite:///mlflow.db", None), ("/tmp/mlruns", None), ("file:///tmp/mlruns", None),
])
def test_ui_addresses_only_for_servers_and_never_with_credentials(uri, base):
    assert server_base(uri) == base
    url = run_url(uri, "7", "abc")
    assert url == (None if base is None else f"{base}/#/experiments/7/runs/abc")
    assert url is None or "secret" not in url


def test_report_links_every_run_on_a_server_and_names_them_on_a_local_store():
    data = comparison_data(_rows())
    a = A.analyze(data, n_boot=20, n_orders=10)
    local = comparison_links(data)
    assert local["comparison"] == {"run_id": "r", "url": None} and local["serve"].startswith("mlflow ui --backend-store-uri")
    assert set(local["sweeps"]) == {"fixed", "awnn"} and local["sweeps"]["awnn"]["assessment"]["run_id"] == "sw-awnn-assessment"
    md = render_markdown(build_document(a, a.summary()), PLOTS)
    assert "## MLflow runs" in md and "`sw-fixed-selection`" in md and "http://" in md  # the local UI's address pattern

    import shlex

    data.tracking_uri = "sqlite:////tmp/a b/mlflow.db"  # a path with a space: the command stays copy-pasteable
    assert shlex.split(comparison_links(data)["serve"]) == ["mlflow", "ui", "--backend-store-uri", "sqlite:////tmp/a b/mlflow.db"]

    data.tracking_uri = "http://u:p@mlflow.local:5000"
    a = A.analyze(data, n_boot=20, n_orders=10)
    doc = build_document(a, a.summary())
    md = render_markdown(doc, PLOTS)
    assert "[`sw-awnn-assessment`](http://mlflow.local:5000/#/experiments/1/runs/sw-awnn-assessment)" in md
    html = render_html(doc, {name: b"png" for name in PLOTS}, title="t")
    assert '<a href="http://mlflow.local:5000/#/experiments/1/runs/sw-awnn-assessment"><code>sw-awnn-assessment</code></a>' in html
    assert "u:p@" not in md and "u:p@" not in html
